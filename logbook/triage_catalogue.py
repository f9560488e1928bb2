"""Auto-triage's built-in rules, the catalogue the migrations seeded as TriageRule rows
(logbook/migrations/0019_triage_rules_as_data.py and later): message patterns by family,
XID codes by number (NVIDIA's XID catalog), DCGM event kinds, each citing its source. The
engine (logbook.autotriage) reads a project's rows from the database; DB-free tests and the
labelled sets read this catalogue, and tests/logbook/test_triage_rules.py checks that the
seeded rows and this catalogue agree (docs/triage.md: how a rule change is shipped).

Patterns are RE2 (logbook.safe_patterns): no look-around; a named group `unless` marks a
match that does not count.
"""

from __future__ import annotations

from dataclasses import dataclass

XID_CATALOG = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
TORCH_NCCL = "https://pytorch.org/docs/stable/torch_nccl_environment_variables.html"
NCCL_TROUBLESHOOTING = (
    "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
)
CUDA_ERRORS = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"
KERNEL_RAS = "https://docs.kernel.org/admin-guide/ras.html"
KERNEL_NVME = "https://docs.kernel.org/admin-guide/abi-testing.html"
LLAMA3 = "https://arxiv.org/abs/2407.21783"
DCGM = "https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/feature-overview.html"
MEGASCALE = "https://arxiv.org/abs/2402.15627"
PYTHON_ERRORS = "https://docs.python.org/3/library/exceptions.html"
CUDNN_STATUS = "https://docs.nvidia.com/deeplearning/cudnn/latest/api/cudnn-graph-library.html"
NCCL_ENV = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
PYTORCH_DATALOADER = "https://pytorch.org/docs/stable/data.html#multi-process-data-loading"
PYTORCH_SERIALIZATION = "https://pytorch.org/docs/stable/notes/serialization.html"
ARROW_ERRORS = "https://arrow.apache.org/docs/python/api/misc.html#exceptions"
HF_HUB_ERRORS = "https://huggingface.co/docs/huggingface_hub/package_reference/utilities"
S3_ERRORS = "https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html"
GCS_RETRIES = "https://cloud.google.com/storage/docs/retry-strategy"
SLURM_CGROUP = "https://slurm.schedmd.com/cgroup.conf.html"
SLURM_SRUN = "https://slurm.schedmd.com/srun.html"
PYTHON_MULTIPROCESSING = (
    "https://docs.python.org/3/library/multiprocessing.html#the-spawn-and-forkserver-start-methods"
)
LINUX_OOM = "https://docs.kernel.org/admin-guide/mm/concepts.html#oom-killer"
XLA_ERRORS = "https://openxla.org/xla/errors"
AWS_OFI_NCCL = "https://github.com/aws/aws-ofi-nccl/blob/master/doc/efa-env-var.md"
FABRIC_MANAGER = "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html"
IB = NCCL_TROUBLESHOOTING


@dataclass(frozen=True)
class MessageRule:
    """A regular expression (case-insensitive, searched in the message) pointing at a
    taxonomy slug. Admins add rules of the same shape in the admin (TriagePattern)."""

    name: str
    pattern: str
    category: str
    component: str
    weight: float
    source: str = ""


@dataclass(frozen=True)
class XidRule:
    category: str
    component: str
    weight: float


# NVIDIA's XID catalog (see XID_CATALOG): what each code most often means for a training job.
# Every code the catalog lists as used on data-centre GPUs (A100 to GB200) and a training job
# can meet, read from its description and resolution buckets: CHECK_APP/CUDA or
# INVESTIGATE_SW points at the application (software-bug) or the driver (dependency);
# RESET_GPU or CONTACT_SUPPORT at the GPU; ECC, row-remap and DRAM codes at its memory, 172
# (SRAM) at SRAM; NVLink codes at the GPU as 74 is. Weights stay below 0.5 where the catalog
# says "restart the app" and nothing more. Video, JPEG, optical-flow and display engines,
# confidential-computing and informational power-smoothing codes are left out: they say
# nothing about why a training job stopped. 154 and 45 only follow another XID.
# 13 and 31 are most often the application's own bug; 45 only follows another XID (a
# preemptive cleanup), so it says little alone; 63 records a row remap that succeeded.
XID_RULES: dict[int, XidRule] = {
    8: XidRule("faulty-gpu", "GPU stopped processing (XID 8)", 0.5),
    11: XidRule("software-bug", "Invalid or corrupted push buffer stream (XID 11)", 0.35),
    13: XidRule("software-bug", "Graphics engine exception (XID 13)", 0.45),
    25: XidRule("software-bug", "Invalid or illegal push buffer stream (XID 25)", 0.35),
    31: XidRule("software-bug", "GPU memory page fault (XID 31)", 0.45),
    32: XidRule("faulty-gpu", "Corrupted push buffer stream (XID 32)", 0.5),
    37: XidRule("dependency", "Driver firmware error (XID 37)", 0.4),
    38: XidRule("dependency", "Driver firmware error (XID 38)", 0.5),
    39: XidRule("faulty-gpu", "Copy engine exception (XID 39)", 0.4),
    40: XidRule("faulty-gpu", "Copy engine exception (XID 40)", 0.4),
    41: XidRule("faulty-gpu", "Copy engine exception (XID 41)", 0.4),
    43: XidRule("software-bug", "GPU stopped processing (XID 43)", 0.35),
    44: XidRule("faulty-gpu", "Graphics engine fault during context switch (XID 44)", 0.4),
    45: XidRule("faulty-gpu", "Preemptive cleanup (XID 45)", 0.1),
    46: XidRule("faulty-gpu", "GPU stopped processing (XID 46)", 0.7),
    48: XidRule("gpu-hbm3-memory", "Double-bit ECC error (XID 48)", 0.9),
    54: XidRule("power-supply", "Auxiliary power not connected to the GPU (XID 54)", 0.7),
    61: XidRule("gpu-system-processor", "Internal micro-controller breakpoint (XID 61)", 0.6),
    62: XidRule("gpu-system-processor", "Internal micro-controller halt (XID 62)", 0.7),
    63: XidRule("gpu-hbm3-memory", "Row remapping recorded (XID 63)", 0.55),
    64: XidRule("gpu-hbm3-memory", "Row remapping failure (XID 64)", 0.85),
    66: XidRule("dependency", "Illegal access by driver (XID 66)", 0.45),
    67: XidRule("dependency", "Illegal access by driver (XID 67)", 0.45),
    69: XidRule("faulty-gpu", "Graphics engine class error (XID 69)", 0.5),
    74: XidRule("faulty-gpu", "NVLink error (XID 74)", 0.8),
    78: XidRule("dependency", "vGPU start error (XID 78)", 0.6),
    79: XidRule("faulty-gpu", "GPU has fallen off the bus (XID 79)", 0.95),
    80: XidRule("software-bug", "Corrupted data sent to GPU (XID 80)", 0.35),
    92: XidRule("gpu-hbm3-memory", "High single-bit ECC error rate (XID 92)", 0.5),
    93: XidRule("faulty-gpu", "InfoROM wear limit exceeded (XID 93)", 0.3),
    94: XidRule("gpu-hbm3-memory", "Contained ECC error (XID 94)", 0.8),
    95: XidRule("gpu-hbm3-memory", "Uncontained ECC error (XID 95)", 0.9),
    109: XidRule("faulty-gpu", "Context switch timeout (XID 109)", 0.4),
    110: XidRule("dependency", "Security fault (XID 110)", 0.4),
    119: XidRule("gpu-system-processor", "GSP RPC timeout (XID 119)", 0.9),
    120: XidRule("gpu-system-processor", "GSP error (XID 120)", 0.9),
    121: XidRule("faulty-gpu", "C2C link error (XID 121)", 0.6),
    136: XidRule("faulty-gpu", "NVLink training failed (XID 136)", 0.6),
    137: XidRule("faulty-gpu", "NVLink privilege error (XID 137)", 0.4),
    140: XidRule("gpu-hbm3-memory", "Unrecovered ECC error (XID 140)", 0.85),
    143: XidRule("faulty-gpu", "GPU initialization failure (XID 143)", 0.8),
    144: XidRule("faulty-gpu", "NVLink SAW error (XID 144)", 0.75),
    145: XidRule("faulty-gpu", "NVLink RLW error (XID 145)", 0.75),
    146: XidRule("faulty-gpu", "NVLink TLW error (XID 146)", 0.75),
    147: XidRule("faulty-gpu", "NVLink TREX error (XID 147)", 0.75),
    148: XidRule("faulty-gpu", "NVLink NVLPW_CTRL error (XID 148)", 0.75),
    149: XidRule("faulty-gpu", "NVLink NETIR error (XID 149)", 0.75),
    150: XidRule("faulty-gpu", "NVLink MSE error (XID 150)", 0.75),
    154: XidRule("faulty-gpu", "GPU recovery action changed (XID 154)", 0.1),
    155: XidRule("software-bug", "NVLink software-defined error (XID 155)", 0.4),
    156: XidRule("faulty-gpu", "Resource retirement event (XID 156)", 0.5),
    157: XidRule("faulty-gpu", "Resource retirement failure (XID 157)", 0.6),
    158: XidRule("faulty-gpu", "GPU fatal timeout (XID 158)", 0.7),
    159: XidRule("faulty-gpu", "CHI non-data error (XID 159)", 0.4),
    160: XidRule("software-bug", "Channel retirement event (XID 160)", 0.35),
    161: XidRule("software-bug", "Channel retirement failure (XID 161)", 0.35),
    164: XidRule("faulty-gpu", "Power smoothing circuitry low lifetime (XID 164)", 0.4),
    165: XidRule("faulty-gpu", "Power smoothing circuitry lifetime exhausted (XID 165)", 0.6),
    167: XidRule("faulty-gpu", "PCIe fatal timeout (XID 167)", 0.7),
    168: XidRule("gpu-hbm3-memory", "Reduced GPU memory capacity (XID 168)", 0.6),
    169: XidRule("gpu-system-processor", "Internal micro-controller halt (XID 169)", 0.6),
    171: XidRule("gpu-hbm3-memory", "Uncorrectable DRAM error (XID 171)", 0.9),
    172: XidRule("gpu-sram-memory", "Uncorrectable SRAM error (XID 172)", 0.9),
}
# "NVRM: Xid (PCI:0000:18:00): 79, pid=...", "Xid 79", "XID error 79", "Xid (43, pid: 5678)".
XID_LINE = r"\bxid(?:s|\s+errors?)?\b\s*(?:\(\s*pci:[0-9a-f:.]+\s*\)\s*)?[:=(#]?\s*(\d{1,3})\b"
GPU_UUID = r"\bGPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"


def _rule(
    name: str, category: str, component: str, weight: float, source: str, pattern: str
) -> MessageRule:
    return MessageRule(name, pattern, category, component, weight, source)


# The built-in message rules, by family. Weights say how sure the words alone make the cause;
# a symptom (the watchdog) stays low so that any real cause outranks it.
# fmt: off
BUILTIN_RULES: tuple[MessageRule, ...] = (
    # --- NCCL and the PyTorch watchdog: symptoms ------------------------------------------
    _rule("nccl-watchdog", "nccl-watchdog-timeout", "NCCL watchdog timeout", 0.5, TORCH_NCCL,
          r"watchdog caught collective operation timeout|collective operation timeout"
          r"|nccl (?:watchdog|communicator).{0,40}(?:time ?out|timed out|abort)"
          r"|workNCCL\(.{0,200}\) ran for \d+ milliseconds before timing out"
          r"|some nccl operations have failed or timed out|nccl.{0,20}timed? ?out"
          r"|watchdog thread terminated|heartbeat monitor timed out|watchdog got stuck"),
    _rule("hang", "nccl-watchdog-timeout", "Hang", 0.4, MEGASCALE,
          r"hang suspected|step stuck at|job (?:is )?hang(?:ing)?\b"),
    # --- CUDA errors as the job sees them --------------------------------------------------
    _rule("cuda-ecc", "gpu-hbm3-memory", "GPU HBM uncorrectable ECC error", 0.75, CUDA_ERRORS,
          r"uncorrectable ecc error|cudaErrorECCUncorrectable|double[- ]bit ecc"
          r"|ecc error.{0,40}(?:hbm|dram|device memory)|hbm.{0,40}(?:ecc|error)"),
    _rule("sram-ecc", "gpu-sram-memory", "GPU SRAM ECC error", 0.85, XID_CATALOG,
          r"sram.{0,40}(?:ecc|parity|error|uncorrectable)|(?:ecc|parity).{0,40}sram|(?:l2 cache"
          r"|register file|shared memory).{0,30}(?:ecc|parity)"),
    _rule("row-remap", "gpu-hbm3-memory", "GPU HBM row remapping", 0.7, XID_CATALOG,
          r"row remap(?:ping)?.{0,30}(?:fail|pending|error)|remapped rows|page retirement"
          r"|retired pages|remappings? (?:are )?pending|uncorrectable memory errors?"),
    _rule("gpu-lost", "faulty-gpu", "GPU lost", 0.85, CUDA_ERRORS,
          r"fallen off the bus|gpu is lost|gpu has been lost"
          r"|unable to determine the device handle|no cuda-capable device"
          r"|cudaErrorDevicesUnavailable|all cuda-capable devices are busy or unavailable"
          r"|cudaErrorNoDevice|nvml.{0,30}gpu.{0,10}lost"
          r"|device .{0,30} has failed to respond"),
    _rule("gpu-hardware", "faulty-gpu", "GPU hardware error", 0.7, CUDA_ERRORS,
          r"cudaErrorHardwareStackError|hardware stack error|uncorrectable nvlink"
          r"|nvlink.{0,40}(?:error|fatal|down|fail|inactive)"
          r"|gpu.{0,20}(?:hardware|board) (?:failure|fault|error)|faulty gpu|bad gpu"
          r"|gpu.{0,30}requires? (?:a )?reset|reset required"
          # The driver could not bring the GPU up (NVRM's adapter initialisation).
          r"|RmInitAdapter failed|GPU initialization failed|failed to initialize the GPU"),
    _rule("cuda-unknown", "faulty-gpu", "CUDA unknown error", 0.6, CUDA_ERRORS,
          r"CUDA error: unknown error|cudaErrorUnknown"),
    _rule("launch-failure", "faulty-gpu", "CUDA kernel failed on the device", 0.4, CUDA_ERRORS,
          r"unspecified launch failure|cudaErrorLaunchFailure|CUDNN_STATUS_EXECUTION_FAILED"),
    # cuBLAS reports a kernel it could not run (no kernel image for the GPU's architecture, a
    # toolkit older than the GPU) as EXECUTION_FAILED: most often the build, not the device
    # (cuBLAS docs; the threads of DPT#4 and mmdetection#6549 in tests/data).
    _rule("cublas-execution", "dependency", "cuBLAS kernel could not run", 0.45, CUDA_ERRORS,
          r"CUBLAS_STATUS_EXECUTION_FAILED|CUBLAS failure 13"),
    _rule("gsp", "gpu-system-processor", "GPU System Processor (GSP)", 0.85, XID_CATALOG,
          r"\bgsp\b.{0,60}(?:timeout|timed out|error|fail|crash)"
          r"|timeout waiting for rpc from gsp|gsp firmware"),
    _rule("illegal-access", "software-bug", "CUDA kernel bug", 0.5, CUDA_ERRORS,
          r"illegal memory access|cudaErrorIllegalAddress|misaligned address"
          r"|illegal instruction was encountered|device-side assert|cudaErrorAssert"
          r"|index out of bounds|CUBLAS_STATUS_NOT_SUPPORTED|invalid configuration argument"),
    _rule("gpu-oom", "software-bug", "GPU out of memory", 0.65, CUDA_ERRORS,
          r"cuda out of memory|OutOfMemoryError|cudaErrorMemoryAllocation"
          r"|out of memory.{0,40}(?:gpu|cuda|device)|CUBLAS_STATUS_ALLOC_FAILED"
          # NCCL's own allocation failures (src/include/alloc.h prints the CUDA error string).
          r"|cuda failure.{0,10}out of memory"),
    # XLA's out-of-memory on TPU and GPU: the job asked for more device memory than there is
    # (OOM convention of tests/data/README.md), whatever the memory space is called (HBM).
    _rule("xla-oom", "software-bug", "Device out of memory (XLA)", 0.65, XLA_ERRORS,
          r"RESOURCE_EXHAUSTED.{0,120}(?:memory|allocat|reserve)|ran out of memory in memory space"
          r"|out of memory while trying to allocate|error allocating device buffer"),
    # The kernel's OOM killer stopping the job for its host-memory footprint.
    _rule("host-oom", "software-bug", "Host out of memory (OOM killer)", 0.55, LINUX_OOM,
          r"out of memory: kill(?:ed)? process|invoked oom-killer|oom_reaper: reaped"),
    # --- Framework bugs: Python tracebacks and crashes ---------------------------------------
    _rule("traceback", "software-bug", "Python exception", 0.3, PYTHON_ERRORS,
          r"traceback \(most recent call last\)"),
    _rule("python-error", "software-bug", "Python exception", 0.55, PYTHON_ERRORS,
          r"\b(?:AttributeError|TypeError|KeyError|IndexError|NameError|AssertionError"
          r"|ZeroDivisionError|UnboundLocalError|NotImplementedError|RecursionError)\b"
          r"|RuntimeError: (?:shape|size|expected|mat1 and mat2|the size|Expected"
          r"|Trying to backward|one of the variables|element \d+ of tensors)|ValueError:"),
    _rule("segfault", "software-bug", "Crash (segfault/abort)", 0.45, LLAMA3,
          r"segmentation fault|SIGSEGV|signal 11\b|core dumped|double free|free\(\): invalid"
          r"|stack smashing|SIGABRT|terminate called"),
    _rule("deadlock", "software-bug", "Collective mismatch", 0.45, TORCH_NCCL,
          r"deadlock|mismatched collective|collective.{0,30}mismatch|desync"
          r"|mismatch between collectives|collectives differ"
          r"|different (?:number of|order)"),
    # Python's multiprocessing refusing to start a child from a module without the
    # `if __name__ == "__main__":` guard (the spawn start method re-imports the script).
    _rule("spawn-main-guard", "software-bug", "Child process started at import", 0.55,
          PYTHON_MULTIPROCESSING,
          r"before the current process has finished its bootstrapping phase"
          r"|freeze_support\(\)"),
    # A runtime that says it hit its own compiler's bug (XLA: "This is likely an XLA compiler
    # bug, please file a bug").
    _rule("compiler-bug", "software-bug", "Compiler or runtime bug", 0.45, XLA_ERRORS,
          r"(?:likely|probably) an? (?:\w+ )?compiler bug|please file a bug"),
    # --- Dependencies: versions, libraries, drivers ------------------------------------------
    _rule("dependency", "dependency", "Dependency or version", 0.6, NCCL_TROUBLESHOOTING,
          r"ModuleNotFoundError|ImportError|undefined symbol|cannot open shared object file"
          r"|GLIBC_\d|version mismatch|incompatible version|requires? (?:a )?(?:newer"
          r"|older) version|driver version is insufficient|cudaErrorInsufficientDriver"
          r"|CUDA driver version|libnccl|no kernel image is available"
          r"|unsupported (?:cuda|gpu) architecture"),
    # NVML and the driver disagreeing, a PyTorch build without the GPU's architecture
    # (PyTorch prints "sm_90 is not compatible with the current PyTorch installation").
    _rule("driver-build-mismatch", "dependency", "Driver or build mismatch", 0.6, CUDA_ERRORS,
          r"driver/library version mismatch|couldn't communicate with the NVIDIA driver"
          r"|NVIDIA driver on your system is too old|found no NVIDIA driver"
          r"|not compatible with the current PyTorch installation|compiled (?:against|with) .{0,40}"
          r"(?:version|cuda)|built (?:against|for) .{0,40}version"),
    # cuDNN and cuBLAS report a library that could not set itself up or run as INTERNAL_ERROR;
    # the threads that found a cause found mismatched CUDA, cuDNN or driver versions.
    _rule("cuda-library-internal", "dependency", "CUDA library internal error", 0.45,
          CUDNN_STATUS,
          r"CUDNN_STATUS_INTERNAL_ERROR|CUBLAS_STATUS_INTERNAL_ERROR|CUDNN_STATUS_NOT_INITIALIZED"),
    # cudaErrorSystemNotReady (802): on NVSwitch systems the Fabric Manager service is missing
    # or not of the driver's version (Fabric Manager user guide).
    _rule("fabric-manager", "dependency", "Fabric Manager missing (CUDA 802)", 0.6,
          FABRIC_MANAGER,
          r"system not yet initialized|cudaErrorSystemNotReady|CUDA_ERROR_SYSTEM_NOT_READY"
          r"|cuda runtime error \(802\)|fabric ?manager"),
    # A compiled program serialised by a newer toolchain than the runtime reads (StableHLO's
    # portable artifacts carry the producer's version).
    _rule("artifact-version", "dependency", "Runtime older than its compiler", 0.5, XLA_ERRORS,
          r"unknown vhlo|bytecode version \d+ produced by|StableHLO_v\d"),
    # --- Network: InfiniBand, RoCE, NICs ------------------------------------------------------
    _rule("ib-retry", "network-switch-cable", "InfiniBand/RoCE transport errors", 0.55, IB,
          r"transport retry count(?:er)? exceeded|IBV_WC_RETRY_EXC_ERR|retry exc|ibv_poll_cq"
          r"|local (?:catastrophic|protection) error|wc status|completion with error"
          r"|IBV_WC_\w+|got completion from peer.{0,120}(?:status|error)"),
    _rule("link-flap", "network-switch-cable", "Network link or switch", 0.6, IB,
          r"link (?:is )?(?:down|flap|flapping|went down)|port .{0,30}(?:down|flap|errors?)"
          r"|symbol errors?|link_downed|link error recovery|lost carrier"
          r"|switch.{0,30}(?:fail|down|reboot|error)|\bcable\b|\boptics?\b|transceiver"
          r"|(?:leaf|spine|tor) switch|\bNET/Socket\b.{0,80}error"
          r"|call to recv from .{0,80}failed\s*:\s*connection timed out"),
    # NCCL's ncclUnhandledCudaError: a CUDA call failed under NCCL, most often a CUDA/NCCL
    # build mismatch (NCCL troubleshooting).
    _rule("nccl-cuda", "dependency", "NCCL/CUDA mismatch", 0.4, NCCL_TROUBLESHOOTING,
          r"unhandled cuda error"),
    _rule("nic-port", "nic", "Host adapter port down", 0.6, NCCL_TROUBLESHOOTING,
          r"physical state:\s*(?:disabled|polling)|\bstate:\s*down\b"
          r"|ibv_(?:modify_qp|create_qp|reg_mr|open_device) failed"),
    # The host sees no IB device at all: its adapter's driver or firmware did not come up.
    _rule("ib-device-missing", "nic", "IB adapter not present", 0.5, NCCL_TROUBLESHOOTING,
          r"sys files not found \(/sys/class/infiniband|no IB devices found"
          r"|(?:ibstat|ibv_devinfo|ibv_devices)\S*:? .{0,40}(?:no \w+ devices|not found|failed)"),
    _rule("nic", "nic", "NIC / host network adapter", 0.45, NCCL_TROUBLESHOOTING,
          r"\bNET/IB\b.{0,80}(?:error|fail|abort)|mlx5.{0,60}(?:error|fail|fatal|health"
          r"|timeout|syndrome)|\bNIC\b|\bHCA\b|ConnectX|network adapter|ib(?:_"
          r"| )?port.{0,20}(?:fail|error)|\bip link\b|eth\d.{0,20}(?:down|reset)"
          r"|remote process exited or there was a network error"
          r"|unhandled system error"),
    # --- Storage: SSDs and filesystems --------------------------------------------------------
    _rule("nvme", "ssd", "NVMe SSD", 0.75, KERNEL_NVME,
          r"\bnvme\d*(?:n\d+)?(?:p\d+)?\b.{0,80}(?:error|fail|timeout|reset|abort|down|dead)"
          r"|i/o error,? dev nvme|nvme.{0,20}controller|ssd.{0,40}(?:fail|error|wear|dead)"
          r"|smart.{0,30}(?:fail|critical)|media error|medium error,? dev nvme"),
    _rule("filesystem", "storage", "Storage or filesystem", 0.55, KERNEL_RAS,
          r"(?:ext4|xfs|lustre|nfs|gpfs|beegfs|weka|fuse)[-\w]*.{0,60}(?:error|fail|timeout"
          r"|corrupt|stale)|stale (?:nfs )?file handle|errno 116\b|no space left on device"
          r"|disk quota exceeded"
          r"|read-only file system|input/output error|blk_update_request|buffer i/o error"
          r"|checkpoint.{0,60}(?:save|load|upload|write|read).{0,40}(?:fail|error|timeout)"
          r"|s3.{0,40}(?:error|timeout|slowdown)"
          # torch.save's writer when the filesystem under the checkpoint refuses a write.
          r"|PytorchStreamWriter failed writing|file write failed"),
    # torch.load's reader on a checkpoint whose zip has no central directory: a file cut short
    # (an interrupted save or copy), not the code that reads it.
    _rule("checkpoint-truncated", "storage", "Checkpoint file incomplete", 0.55,
          PYTORCH_SERIALIZATION,
          r"failed finding central directory|PytorchStreamReader failed reading"),
    # Object stores refusing or timing out (S3's SlowDown and 503s, GCS's 5xx; the clients'
    # exceptions name them).
    _rule("object-store", "storage", "Object store (S3/GCS)", 0.55, S3_ERRORS,
          r"botocore\.exceptions\.\w+|\(SlowDown\)|storage\.googleapis\.com"
          r"|googleapis\.com/(?:upload/)?storage|\bServiceUnavailable\b|s3\.amazonaws\.com"
          r"|\bNoSuchKey\b"),
    # --- Host: CPU, memory, power, chassis, PCIe ------------------------------------------------
    _rule("mce-memory", "system-memory", "System memory (DIMM)", 0.75, KERNEL_RAS,
          r"edac.{0,80}(?:ue|uncorrect|error)|dimm.{0,40}(?:error|fail)|memory (?:controller"
          r"|error).{0,40}(?:uncorrect|fatal)|uncorrected .{0,30}memory"
          r"|machine check.{0,80}memory|system memory|host memory.{0,30}(?:error|fail)"
          r"|\bECC\b.{0,30}\bDIMM\b"),
    _rule("memory-controller", "system-memory", "System memory (DIMM)", 0.75, KERNEL_RAS,
          r"memory controller.{0,60}err|memory read error|memory scrub"),
    _rule("dimm", "system-memory", "System memory (DIMM)", 0.6, KERNEL_RAS,
          r"\bDIMM[\w#-]*|\[hardware error\].{0,100}\b(?:dram|memory)\b"),
    _rule("mce-cpu", "cpu", "CPU (machine check)", 0.55, KERNEL_RAS,
          r"machine check(?: exception| events?)?|\bmce\b|hardware error.{0,40}cpu"
          r"|cpu.{0,40}(?:hardware error|fault|failure)|processor.{0,30}(?:error|fault)"
          r"|cpu \d+.{0,30}(?:stuck|lockup)|soft lockup|hard lockup"),
    _rule("power", "power-supply", "Power supply", 0.7, DCGM,
          r"power supply|\bpsu\b|power (?:loss|failure|fault|outage|brake)|lost power"
          r"|power (?:good|rail)|voltage.{0,30}(?:fault|out of range)|\bpdu\b"),
    _rule("gpu-thermal", "gpu-thermal-interface-sensor", "GPU thermal", 0.65, DCGM,
          r"(?:gpu|hbm|memory).{0,40}(?:over ?temp|temperature|thermal)|(?:thermal"
          r"|temperature).{0,40}(?:gpu|slowdown|throttl|shutdown|limit|sensor)"
          r"|hw thermal slowdown|thermal interface|heatsink|thermal paste"
          # nvidia-smi's clock event reasons, DCGM's health check, the usual words for it.
          r"|sw thermal slowdown|thermal violation|overheat\w*|junction temp\w*"
          r"|over[- ]temperature|slowdown temp"),
    _rule("chassis", "server-chassis", "Server chassis / baseboard", 0.55, LLAMA3,
          r"\bfan\b.{0,30}(?:fail|fault|error|speed)|chassis|\bbmc\b|baseboard|motherboard"
          r"|backplane|\bipmi\b.{0,40}(?:error|fault)|\bsel\b.{0,40}(?:error|fault)"),
    _rule("pcie", "io-expansion-board", "PCIe / IO expansion board", 0.55, KERNEL_RAS,
          r"pcie? bus error|\baer\b.{0,60}(?:error|uncorrect|fatal)|pcie? link.{0,30}(?:down"
          r"|degraded|fail|error)|pcie switch|\bplx\b|retimer|riser|io expansion"
          r"|i/o expansion|surprise (?:link )?down"),
    # --- Silent data corruption, divergence, data, operations ---------------------------------
    _rule("sdc", "silent-data-corruption", "Silent data corruption", 0.75, LLAMA3,
          r"silent data corruption|\bsdc\b|checksum mismatch|bit ?flip|(?:replica"
          r"|rank)s? (?:disagree|diverge|mismatch)|mismatch between (?:replicas|ranks)"
          r"|non-?deterministic.{0,30}(?:mismatch|result)|silently (?:return|produc|comput)\w*"
          r"|(?:incorrect|wrong) (?:\w+ ){0,3}(?:output|results?)\b|corrupted data"),
    _rule("loss-divergence", "loss-divergence", "Loss divergence", 0.6, LLAMA3,
          r"loss (?:is |became |went )?(?:nan|inf)|nan loss|loss spike"
          r"|\bnan in (?:\w+ ){0,2}(?:grad|loss)|(?:found|detected) (?:a )?nan\b"
          r"|(?:grad(?:ient)?[ _]norm|loss).{0,30}(?:nan|inf|explod|diverg|spike)|diverged"
          r"|divergence"),
    # autograd's anomaly mode naming the op that first produced a NaN.
    _rule("anomaly-nan", "loss-divergence", "NaN produced in backward", 0.5, LLAMA3,
          r"returned nan values|returned an invalid gradient|function '\w+' returned nan"),
    _rule("loss-scale", "loss-divergence", "Loss scale collapsing (fp16 overflow)", 0.45, LLAMA3,
          r"\bloss[_ ]scale\b|gradient overflow|overflow.{0,40}(?:skipping|reducing)"),
    _rule("data-pipeline-stack", "data-pipeline", "Data loader", 0.5, LLAMA3,
          r"torch/utils/data/|dataloader\.py|_MultiProcessingDataLoaderIter"
          r"|worker timed out after \d+ ?s|slower data loading"
          # Pillow's errors for a broken sample (a truncated or unreadable image in a shard).
          r"|image file is truncated|cannot identify image file"
          # A sample the dataset's own code was building (its __getitem__, the collate step).
          r"|in __getitem__|default_collate|collate_fn|datasets/(?:builder|arrow_dataset)\.py"),
    # Shards that cannot be decompressed or decoded: the data, not the code reading it.
    _rule("data-decode", "data-pipeline", "Data shard undecodable", 0.5, ARROW_ERRORS,
          r"DatasetGenerationError|tarfile\.ReadError|zlib\.error|Error -3 while decompressing"
          r"|unexpected end of (?:data|file)|EOFError: Ran out of input|UnicodeDecodeError"
          r"|JSONDecodeError"),
    # A dataset's files that cannot be read as what they claim to be (Arrow/Parquet, Megatron
    # and fairseq indexed datasets).
    _rule("dataset-files", "data-pipeline", "Dataset files unreadable", 0.6, ARROW_ERRORS,
          r"parquet magic bytes|ArrowInvalid|\bArrow\w*Error|corrupt snappy"
          r"|dataset does not exist|\.idx and \.bin|index file doesn't match expected format"),
    # The dataset's host rate-limiting or refusing the loader (Hugging Face Hub's HTTP errors).
    _rule("dataset-hub", "data-pipeline", "Dataset host refused", 0.55, HF_HUB_ERRORS,
          r"HfHubHTTPError|huggingface\.co/(?:api/)?datasets/\S*"),
    # NLLLoss's device assert: a target outside [0, n_classes), the labels of the data.
    _rule("labels-out-of-range", "data-pipeline", "Labels out of range", 0.55, PYTHON_ERRORS,
          r"ClassNLLCriterion|t >= 0 && t < n_classes|target -?\d+ is out of bounds"),
    _rule("data-pipeline", "data-pipeline", "Data pipeline", 0.6, LLAMA3,
          r"dataloader worker.{0,60}(?:killed|exited|died|crash)|data ?loader.{0,40}(?:error"
          r"|timeout|fail)|tokeniz.{0,40}(?:error|fail)|corrupt(?:ed)? (?:sample|shard"
          r"|record)|dataset.{0,40}(?:error|not found|fail)"),
    # --- Launch and environment settings: config-change -------------------------------------
    _rule("open-files-limit", "config-change", "Open-files limit (ulimit -n)", 0.6,
          PYTHON_ERRORS, r"too many open files|errno 24\b|\bEMFILE\b"),
    _rule("shm-limit", "config-change", "Shared-memory limit (/dev/shm)", 0.5,
          PYTORCH_DATALOADER,
          r"insufficient shared memory|shared memory limit|/dev/shm|shm[-_]size"),
    # A rank launched on a GPU it cannot have: more ranks than GPUs, or CUDA_VISIBLE_DEVICES
    # (cudaErrorInvalidDevice; NCCL's "Duplicate GPU detected").
    _rule("device-assignment", "config-change", "Ranks and GPUs do not match", 0.6, CUDA_ERRORS,
          r"invalid device ordinal|cudaErrorInvalidDevice|duplicate GPU detected"
          r"|both on CUDA device"),
    # The rendezvous port or address of the launch (MASTER_PORT in use, MASTER_ADDR wrong).
    _rule("rendezvous-address", "config-change", "Rendezvous address or port", 0.5, TORCH_NCCL,
          r"address already in use|EADDRINUSE|server socket has failed to (?:listen|bind)"),
    # NCCL talking over loopback: the interface it picked is not the hosts' network
    # (NCCL_SOCKET_IFNAME).
    _rule("nccl-loopback", "config-change", "NCCL on the loopback interface", 0.55, NCCL_ENV,
          r"connect to 127\.0\.0\.1|using \[0\]lo:"),
    # A RoCE queue pair that cannot reach RTR: the GID (address) NCCL used does not route
    # (NCCL_IB_GID_INDEX, NCCL_CROSS_NIC).
    _rule("roce-gid", "config-change", "RoCE GID or rail setting", 0.65, NCCL_ENV,
          r"ibv_modify_qp failed.{0,40}(?:timed out|unreachable|errno 110)"
          r"|NCCL_IB_GID_INDEX|GID index"),
    # aws-ofi-nccl could not open EFA at all: the devices or provider are not in the
    # environment (container devices, security group), not a failing link.
    _rule("ofi-init", "config-change", "EFA/libfabric not available", 0.5, AWS_OFI_NCCL,
          r"NET/OFI.{0,120}(?:fi_getinfo|couldn't open AV|creating new endpoint.{0,60}failed)"),
    # Slurm refusing the job's own request (GPUs, partition, account, node features): the
    # launch command asks for what the cluster does not offer, nothing is broken.
    _rule("slurm-request", "config-change", "Slurm request not satisfiable", 0.6, SLURM_SRUN,
          r"Invalid generic resource \(gres\) specification|Invalid partition name specified"
          r"|Requested node configuration is not available"
          r"|Invalid account or account/partition combination"
          r"|Invalid (?:qos|feature) specification|More processors requested than permitted"),
    # Slurm's cgroup killing a step for exceeding the memory it asked for (--mem).
    _rule("slurm-cgroup-oom", "config-change", "Job memory request (Slurm cgroup)", 0.7,
          SLURM_CGROUP,
          r"oom[-_]kill events? in (?:step|StepId)|cgroup out-of-memory handler"
          r"|task \d+: Out Of Memory"),
    _rule("preemption", "scheduler-preemption", "Scheduler preemption", 0.7, LLAMA3,
          r"\bpreempted\b|preemption(?P<unless> ?cleanup)?|spot instance|\bevicted\b"
          # Cloud spot reclaims and Slurm requeues announce themselves.
          r"|spot interruption|interruption notice|termination notice|job requeue|requeued"),
    # torchrun's "closing signal SIGTERM" is it stopping the other workers: not a scheduler's
    # (the `unless` group skips that match: logbook.safe_patterns).
    _rule("sigterm", "scheduler-preemption", "Stopped by the scheduler (SIGTERM)", 0.35, LLAMA3,
          r"(?P<unless>closing signal |Sending process )?\bSIGTERM\b|received signal 15"
          r"|signal 15\b|requested to terminate"),
    _rule("host-maintenance", "host-maintenance", "Host maintenance", 0.5, LLAMA3,
          r"host maintenance|node (?:was )?(?:drained|rebooted|reboot|down|failure"
          r"|not responding)|NODE_FAIL|unscheduled reboot|kernel panic|host (?:unreachable"
          r"|down|rebooted)|maintenance event|hypervisor"),
)
# fmt: on


# DCGM health events other than XIDs (telemetry.models.DeviceEvent.Kind values).
DCGM_KIND_RULES: dict[str, XidRule] = {
    "ecc_uncorrectable": XidRule("gpu-hbm3-memory", "Uncorrectable ECC error (DCGM)", 0.85),
    "row_remap": XidRule("gpu-hbm3-memory", "Row remapped (DCGM)", 0.55),
    "row_remap_failure": XidRule("gpu-hbm3-memory", "Row remapping failure (DCGM)", 0.85),
    "thermal": XidRule("gpu-thermal-interface-sensor", "Thermal limit (DCGM)", 0.6),
}
# An SDC record's verdict: how strongly it names silent data corruption.
SDC_VERDICT_WEIGHTS = {"confirmed": 0.9, "pending": 0.5, "inconclusive": 0.3}
