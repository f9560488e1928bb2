"""Auto-triage step 2 (issue 37): rules as data, categories and rules per project.

- RootCause gets a family (how auto-triage groups evidence, logbook.triage_combine) and a
  project (empty: site-wide; a project admin's categories are that project's alone), its slug
  and name unique site-wide and within a project instead of everywhere.
- TriageRule: every rule auto-triage weighs, the built-ins seeded here verbatim (message
  patterns, XID codes, DCGM event kinds, each with its source); TriageRuleSetting: a
  project's change to a site-wide rule (disabled, re-weighted).
- The admins' TriagePattern rows become site-wide message rules (`pattern-<id>`), and the
  table goes.

The SQL is frozen: later changes to logbook/triage_catalogue.py ship as new migrations
(docs/triage.md, "Shipping a rule change").
"""

import django.db.models.deletion
from django.db import migrations, models

FAMILIES = """
UPDATE logbook_rootcause SET family = 'gpu' WHERE project_id IS NULL AND slug IN ('faulty-gpu', 'gpu-hbm3-memory', 'gpu-sram-memory', 'gpu-system-processor', 'gpu-thermal-interface-sensor', 'silent-data-corruption');
UPDATE logbook_rootcause SET family = 'host' WHERE project_id IS NULL AND slug IN ('cpu', 'host-maintenance', 'io-expansion-board', 'power-supply', 'server-chassis', 'ssd', 'system-memory');
UPDATE logbook_rootcause SET family = 'job' WHERE project_id IS NULL AND slug IN ('config-change', 'data-pipeline', 'loss-divergence', 'planned-maintenance', 'scheduler-preemption', 'storage');
UPDATE logbook_rootcause SET family = 'network' WHERE project_id IS NULL AND slug IN ('network-switch-cable', 'nic');
UPDATE logbook_rootcause SET family = 'software' WHERE project_id IS NULL AND slug IN ('dependency', 'software-bug');
UPDATE logbook_rootcause SET family = 'symptom' WHERE project_id IS NULL AND slug IN ('nccl-watchdog-timeout', 'unknown');
"""

# The built-in rules as logbook/triage_catalogue.py held them at this migration, verbatim.
BUILTIN_RULES = r"""
INSERT INTO logbook_triagerule
    (project_id, kind, name, pattern, xid, dcgm_kind, root_cause_id, component, weight,
     enabled, source, builtin, position, created_at, updated_at)
SELECT NULL, v.kind, v.name, v.pattern, v.xid, v.dcgm_kind, rc.id, v.component, v.weight,
       TRUE, v.source, TRUE, v.position, now(), now()
FROM (VALUES
    ('message', 'nccl-watchdog', 'watchdog caught collective operation timeout|collective operation timeout|nccl (?:watchdog|communicator).{0,40}(?:time ?out|timed out|abort)|workNCCL\(.{0,200}\) ran for \d+ milliseconds before timing out|some nccl operations have failed or timed out|nccl.{0,20}timed? ?out|watchdog thread terminated|heartbeat monitor timed out|watchdog got stuck', NULL::integer, '', 'nccl-watchdog-timeout', 'NCCL watchdog timeout', 0.5::float8, 'https://pytorch.org/docs/stable/torch_nccl_environment_variables.html', 10),
    ('message', 'hang', 'hang suspected|step stuck at|job (?:is )?hang(?:ing)?\b', NULL::integer, '', 'nccl-watchdog-timeout', 'Hang', 0.4::float8, 'https://arxiv.org/abs/2402.15627', 20),
    ('message', 'cuda-ecc', 'uncorrectable ecc error|cudaErrorECCUncorrectable|double[- ]bit ecc|ecc error.{0,40}(?:hbm|dram|device memory)|hbm.{0,40}(?:ecc|error)', NULL::integer, '', 'gpu-hbm3-memory', 'GPU HBM uncorrectable ECC error', 0.75::float8, 'https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html', 30),
    ('message', 'sram-ecc', 'sram.{0,40}(?:ecc|parity|error|uncorrectable)|(?:ecc|parity).{0,40}sram|(?:l2 cache|register file|shared memory).{0,30}(?:ecc|parity)', NULL::integer, '', 'gpu-sram-memory', 'GPU SRAM ECC error', 0.85::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 40),
    ('message', 'row-remap', 'row remap(?:ping)?.{0,30}(?:fail|pending|error)|remapped rows|page retirement|retired pages|remappings? (?:are )?pending|uncorrectable memory errors?', NULL::integer, '', 'gpu-hbm3-memory', 'GPU HBM row remapping', 0.7::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 50),
    ('message', 'gpu-lost', 'fallen off the bus|gpu is lost|gpu has been lost|unable to determine the device handle|no cuda-capable device|cudaErrorDevicesUnavailable|all cuda-capable devices are busy or unavailable|cudaErrorNoDevice|nvml.{0,30}gpu.{0,10}lost|device .{0,30} has failed to respond', NULL::integer, '', 'faulty-gpu', 'GPU lost', 0.85::float8, 'https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html', 60),
    ('message', 'gpu-hardware', 'cudaErrorHardwareStackError|hardware stack error|uncorrectable nvlink|nvlink.{0,40}(?:error|fatal|down|fail)|gpu.{0,20}(?:hardware|board) (?:failure|fault|error)|faulty gpu|bad gpu|gpu.{0,30}requires? (?:a )?reset|reset required', NULL::integer, '', 'faulty-gpu', 'GPU hardware error', 0.7::float8, 'https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html', 70),
    ('message', 'cuda-unknown', 'CUDA error: unknown error|cudaErrorUnknown', NULL::integer, '', 'faulty-gpu', 'CUDA unknown error', 0.6::float8, 'https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html', 80),
    ('message', 'launch-failure', 'unspecified launch failure|cudaErrorLaunchFailure|CUDNN_STATUS_EXECUTION_FAILED', NULL::integer, '', 'faulty-gpu', 'CUDA kernel failed on the device', 0.4::float8, 'https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html', 90),
    ('message', 'cublas-execution', 'CUBLAS_STATUS_EXECUTION_FAILED|CUBLAS failure 13', NULL::integer, '', 'dependency', 'cuBLAS kernel could not run', 0.45::float8, 'https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html', 100),
    ('message', 'gsp', '\bgsp\b.{0,60}(?:timeout|timed out|error|fail|crash)|timeout waiting for rpc from gsp|gsp firmware', NULL::integer, '', 'gpu-system-processor', 'GPU System Processor (GSP)', 0.85::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 110),
    ('message', 'illegal-access', 'illegal memory access|cudaErrorIllegalAddress|misaligned address|illegal instruction was encountered|device-side assert|cudaErrorAssert|index out of bounds|CUBLAS_STATUS_NOT_SUPPORTED|invalid configuration argument', NULL::integer, '', 'software-bug', 'CUDA kernel bug', 0.5::float8, 'https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html', 120),
    ('message', 'gpu-oom', 'cuda out of memory|OutOfMemoryError|cudaErrorMemoryAllocation|out of memory.{0,40}(?:gpu|cuda|device)|CUBLAS_STATUS_ALLOC_FAILED', NULL::integer, '', 'software-bug', 'GPU out of memory', 0.65::float8, 'https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html', 130),
    ('message', 'traceback', 'traceback \(most recent call last\)', NULL::integer, '', 'software-bug', 'Python exception', 0.3::float8, 'https://docs.python.org/3/library/exceptions.html', 140),
    ('message', 'python-error', '\b(?:AttributeError|TypeError|KeyError|IndexError|NameError|AssertionError|ZeroDivisionError|UnboundLocalError|NotImplementedError|RecursionError)\b|RuntimeError: (?:shape|size|expected|mat1 and mat2|the size|Expected|Trying to backward|one of the variables|element \d+ of tensors)|ValueError:', NULL::integer, '', 'software-bug', 'Python exception', 0.55::float8, 'https://docs.python.org/3/library/exceptions.html', 150),
    ('message', 'segfault', 'segmentation fault|SIGSEGV|signal 11\b|core dumped|double free|free\(\): invalid|stack smashing|SIGABRT|terminate called', NULL::integer, '', 'software-bug', 'Crash (segfault/abort)', 0.45::float8, 'https://arxiv.org/abs/2407.21783', 160),
    ('message', 'deadlock', 'deadlock|mismatched collective|collective.{0,30}mismatch|desync|different (?:number of|order)', NULL::integer, '', 'software-bug', 'Collective mismatch', 0.45::float8, 'https://pytorch.org/docs/stable/torch_nccl_environment_variables.html', 170),
    ('message', 'dependency', 'ModuleNotFoundError|ImportError|undefined symbol|cannot open shared object file|GLIBC_\d|version mismatch|incompatible version|requires? (?:a )?(?:newer|older) version|driver version is insufficient|cudaErrorInsufficientDriver|CUDA driver version|libnccl|no kernel image is available|unsupported (?:cuda|gpu) architecture', NULL::integer, '', 'dependency', 'Dependency or version', 0.6::float8, 'https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html', 180),
    ('message', 'ib-retry', 'transport retry count(?:er)? exceeded|IBV_WC_RETRY_EXC_ERR|retry exc|ibv_poll_cq|local (?:catastrophic|protection) error|wc status|completion with error|IBV_WC_\w+|got completion from peer.{0,120}(?:status|error)', NULL::integer, '', 'network-switch-cable', 'InfiniBand/RoCE transport errors', 0.55::float8, 'https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html', 190),
    ('message', 'link-flap', 'link (?:is )?(?:down|flap|flapping|went down)|port .{0,30}(?:down|flap|errors?)|symbol errors?|link_downed|link error recovery|lost carrier|switch.{0,30}(?:fail|down|reboot|error)|\bcable\b|\boptics?\b|transceiver|(?:leaf|spine|tor) switch|\bNET/Socket\b.{0,80}error|call to recv from .{0,80}failed\s*:\s*connection timed out', NULL::integer, '', 'network-switch-cable', 'Network link or switch', 0.6::float8, 'https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html', 200),
    ('message', 'nccl-cuda', 'unhandled cuda error', NULL::integer, '', 'dependency', 'NCCL/CUDA mismatch', 0.4::float8, 'https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html', 210),
    ('message', 'nic-port', 'physical state:\s*(?:disabled|polling)|\bstate:\s*down\b|ibv_(?:modify_qp|create_qp|reg_mr|open_device) failed', NULL::integer, '', 'nic', 'Host adapter port down', 0.6::float8, 'https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html', 220),
    ('message', 'nic', '\bNET/IB\b.{0,80}(?:error|fail|abort)|mlx5.{0,60}(?:error|fail|fatal|health|timeout|syndrome)|\bNIC\b|\bHCA\b|ConnectX|network adapter|ib(?:_| )?port.{0,20}(?:fail|error)|\bip link\b|eth\d.{0,20}(?:down|reset)|remote process exited or there was a network error|unhandled system error', NULL::integer, '', 'nic', 'NIC / host network adapter', 0.45::float8, 'https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html', 230),
    ('message', 'nvme', '\bnvme\d*(?:n\d+)?(?:p\d+)?\b.{0,80}(?:error|fail|timeout|reset|abort|down|dead)|i/o error,? dev nvme|nvme.{0,20}controller|ssd.{0,40}(?:fail|error|wear|dead)|smart.{0,30}(?:fail|critical)|media error|medium error,? dev nvme', NULL::integer, '', 'ssd', 'NVMe SSD', 0.75::float8, 'https://docs.kernel.org/admin-guide/abi-testing.html', 240),
    ('message', 'filesystem', '(?:ext4|xfs|lustre|nfs|gpfs|beegfs|weka|fuse)[-\w]*.{0,60}(?:error|fail|timeout|corrupt|stale)|stale file handle|no space left on device|disk quota exceeded|read-only file system|input/output error|blk_update_request|buffer i/o error|checkpoint.{0,60}(?:save|load|upload|write|read).{0,40}(?:fail|error|timeout)|s3.{0,40}(?:error|timeout|slowdown)|PytorchStreamWriter failed writing|file write failed', NULL::integer, '', 'storage', 'Storage or filesystem', 0.55::float8, 'https://docs.kernel.org/admin-guide/ras.html', 250),
    ('message', 'mce-memory', 'edac.{0,80}(?:ue|uncorrect|error)|dimm.{0,40}(?:error|fail)|memory (?:controller|error).{0,40}(?:uncorrect|fatal)|uncorrected .{0,30}memory|machine check.{0,80}memory|system memory|host memory.{0,30}(?:error|fail)|\bECC\b.{0,30}\bDIMM\b', NULL::integer, '', 'system-memory', 'System memory (DIMM)', 0.75::float8, 'https://docs.kernel.org/admin-guide/ras.html', 260),
    ('message', 'memory-controller', 'memory controller.{0,60}err|memory read error|memory scrub', NULL::integer, '', 'system-memory', 'System memory (DIMM)', 0.75::float8, 'https://docs.kernel.org/admin-guide/ras.html', 270),
    ('message', 'dimm', '\bDIMM[\w#-]*|\[hardware error\].{0,100}\b(?:dram|memory)\b', NULL::integer, '', 'system-memory', 'System memory (DIMM)', 0.6::float8, 'https://docs.kernel.org/admin-guide/ras.html', 280),
    ('message', 'mce-cpu', 'machine check(?: exception| events?)?|\bmce\b|hardware error.{0,40}cpu|cpu.{0,40}(?:hardware error|fault|failure)|processor.{0,30}(?:error|fault)|cpu \d+.{0,30}(?:stuck|lockup)|soft lockup|hard lockup', NULL::integer, '', 'cpu', 'CPU (machine check)', 0.55::float8, 'https://docs.kernel.org/admin-guide/ras.html', 290),
    ('message', 'power', 'power supply|\bpsu\b|power (?:loss|failure|fault|outage|brake)|lost power|power (?:good|rail)|voltage.{0,30}(?:fault|out of range)|\bpdu\b', NULL::integer, '', 'power-supply', 'Power supply', 0.7::float8, 'https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/feature-overview.html', 300),
    ('message', 'gpu-thermal', '(?:gpu|hbm|memory).{0,40}(?:over ?temp|temperature|thermal)|(?:thermal|temperature).{0,40}(?:gpu|slowdown|throttl|shutdown|limit|sensor)|hw thermal slowdown|thermal interface|heatsink|thermal paste', NULL::integer, '', 'gpu-thermal-interface-sensor', 'GPU thermal', 0.65::float8, 'https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/feature-overview.html', 310),
    ('message', 'chassis', '\bfan\b.{0,30}(?:fail|fault|error|speed)|chassis|\bbmc\b|baseboard|motherboard|backplane|\bipmi\b.{0,40}(?:error|fault)|\bsel\b.{0,40}(?:error|fault)', NULL::integer, '', 'server-chassis', 'Server chassis / baseboard', 0.55::float8, 'https://arxiv.org/abs/2407.21783', 320),
    ('message', 'pcie', 'pcie? bus error|\baer\b.{0,60}(?:error|uncorrect|fatal)|pcie? link.{0,30}(?:down|degraded|fail|error)|pcie switch|\bplx\b|retimer|riser|io expansion|i/o expansion|surprise (?:link )?down', NULL::integer, '', 'io-expansion-board', 'PCIe / IO expansion board', 0.55::float8, 'https://docs.kernel.org/admin-guide/ras.html', 330),
    ('message', 'sdc', 'silent data corruption|\bsdc\b|checksum mismatch|bit ?flip|(?:replica|rank)s? (?:disagree|diverge|mismatch)|mismatch between (?:replicas|ranks)|non-?deterministic.{0,30}(?:mismatch|result)|silently (?:return|produc|comput)\w*|(?:incorrect|wrong) (?:\w+ ){0,3}(?:output|results?)\b|corrupted data', NULL::integer, '', 'silent-data-corruption', 'Silent data corruption', 0.75::float8, 'https://arxiv.org/abs/2407.21783', 340),
    ('message', 'loss-divergence', 'loss (?:is |became |went )?(?:nan|inf)|nan loss|loss spike|(?:grad(?:ient)?[ _]norm|loss).{0,30}(?:nan|inf|explod|diverg|spike)|diverged|divergence', NULL::integer, '', 'loss-divergence', 'Loss divergence', 0.6::float8, 'https://arxiv.org/abs/2407.21783', 350),
    ('message', 'loss-scale', '\bloss[_ ]scale\b|gradient overflow|overflow.{0,40}(?:skipping|reducing)', NULL::integer, '', 'loss-divergence', 'Loss scale collapsing (fp16 overflow)', 0.45::float8, 'https://arxiv.org/abs/2407.21783', 360),
    ('message', 'data-pipeline-stack', 'torch/utils/data/|dataloader\.py|_MultiProcessingDataLoaderIter|worker timed out after \d+ ?s|slower data loading|image file is truncated|cannot identify image file', NULL::integer, '', 'data-pipeline', 'Data loader', 0.5::float8, 'https://arxiv.org/abs/2407.21783', 370),
    ('message', 'data-pipeline', 'dataloader worker.{0,60}(?:killed|exited|died|crash)|data ?loader.{0,40}(?:error|timeout|fail)|tokeniz.{0,40}(?:error|fail)|corrupt(?:ed)? (?:sample|shard|record)|dataset.{0,40}(?:error|not found|fail)', NULL::integer, '', 'data-pipeline', 'Data pipeline', 0.6::float8, 'https://arxiv.org/abs/2407.21783', 380),
    ('message', 'preemption', '\bpreempted\b|preemption(?P<unless> ?cleanup)?|spot instance|\bevicted\b', NULL::integer, '', 'scheduler-preemption', 'Scheduler preemption', 0.7::float8, 'https://arxiv.org/abs/2407.21783', 390),
    ('message', 'sigterm', '(?P<unless>closing signal |Sending process )?\bSIGTERM\b|received signal 15|signal 15\b|requested to terminate', NULL::integer, '', 'scheduler-preemption', 'Stopped by the scheduler (SIGTERM)', 0.35::float8, 'https://arxiv.org/abs/2407.21783', 400),
    ('message', 'host-maintenance', 'host maintenance|node (?:was )?(?:drained|rebooted|reboot|down|failure|not responding)|NODE_FAIL|unscheduled reboot|kernel panic|host (?:unreachable|down|rebooted)|maintenance event|hypervisor', NULL::integer, '', 'host-maintenance', 'Host maintenance', 0.5::float8, 'https://arxiv.org/abs/2407.21783', 410),
    ('xid', 'xid-8', '', 8, '', 'faulty-gpu', 'GPU stopped processing (XID 8)', 0.5::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 420),
    ('xid', 'xid-13', '', 13, '', 'software-bug', 'Graphics engine exception (XID 13)', 0.45::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 430),
    ('xid', 'xid-31', '', 31, '', 'software-bug', 'GPU memory page fault (XID 31)', 0.45::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 440),
    ('xid', 'xid-32', '', 32, '', 'faulty-gpu', 'Corrupted push buffer stream (XID 32)', 0.5::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 450),
    ('xid', 'xid-38', '', 38, '', 'dependency', 'Driver firmware error (XID 38)', 0.5::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 460),
    ('xid', 'xid-43', '', 43, '', 'software-bug', 'GPU stopped processing (XID 43)', 0.35::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 470),
    ('xid', 'xid-45', '', 45, '', 'faulty-gpu', 'Preemptive cleanup (XID 45)', 0.1::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 480),
    ('xid', 'xid-46', '', 46, '', 'faulty-gpu', 'GPU stopped processing (XID 46)', 0.7::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 490),
    ('xid', 'xid-48', '', 48, '', 'gpu-hbm3-memory', 'Double-bit ECC error (XID 48)', 0.9::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 500),
    ('xid', 'xid-61', '', 61, '', 'gpu-system-processor', 'Internal micro-controller breakpoint (XID 61)', 0.6::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 510),
    ('xid', 'xid-62', '', 62, '', 'gpu-system-processor', 'Internal micro-controller halt (XID 62)', 0.7::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 520),
    ('xid', 'xid-63', '', 63, '', 'gpu-hbm3-memory', 'Row remapping recorded (XID 63)', 0.55::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 530),
    ('xid', 'xid-64', '', 64, '', 'gpu-hbm3-memory', 'Row remapping failure (XID 64)', 0.85::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 540),
    ('xid', 'xid-69', '', 69, '', 'faulty-gpu', 'Graphics engine class error (XID 69)', 0.5::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 550),
    ('xid', 'xid-74', '', 74, '', 'faulty-gpu', 'NVLink error (XID 74)', 0.8::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 560),
    ('xid', 'xid-79', '', 79, '', 'faulty-gpu', 'GPU has fallen off the bus (XID 79)', 0.95::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 570),
    ('xid', 'xid-92', '', 92, '', 'gpu-hbm3-memory', 'High single-bit ECC error rate (XID 92)', 0.5::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 580),
    ('xid', 'xid-94', '', 94, '', 'gpu-hbm3-memory', 'Contained ECC error (XID 94)', 0.8::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 590),
    ('xid', 'xid-95', '', 95, '', 'gpu-hbm3-memory', 'Uncontained ECC error (XID 95)', 0.9::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 600),
    ('xid', 'xid-119', '', 119, '', 'gpu-system-processor', 'GSP RPC timeout (XID 119)', 0.9::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 610),
    ('xid', 'xid-120', '', 120, '', 'gpu-system-processor', 'GSP error (XID 120)', 0.9::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 620),
    ('xid', 'xid-140', '', 140, '', 'gpu-hbm3-memory', 'Unrecovered ECC error (XID 140)', 0.85::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 630),
    ('xid', 'xid-143', '', 143, '', 'faulty-gpu', 'GPU initialization failure (XID 143)', 0.8::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 640),
    ('xid', 'xid-144', '', 144, '', 'faulty-gpu', 'NVLink SAW error (XID 144)', 0.75::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 650),
    ('xid', 'xid-145', '', 145, '', 'faulty-gpu', 'NVLink RLW error (XID 145)', 0.75::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 660),
    ('xid', 'xid-149', '', 149, '', 'faulty-gpu', 'NVLink NETIR error (XID 149)', 0.75::float8, 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html', 670),
    ('dcgm', 'dcgm-ecc-uncorrectable', '', NULL::integer, 'ecc_uncorrectable', 'gpu-hbm3-memory', 'Uncorrectable ECC error (DCGM)', 0.85::float8, 'https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/feature-overview.html', 680),
    ('dcgm', 'dcgm-row-remap', '', NULL::integer, 'row_remap', 'gpu-hbm3-memory', 'Row remapped (DCGM)', 0.55::float8, 'https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/feature-overview.html', 690),
    ('dcgm', 'dcgm-row-remap-failure', '', NULL::integer, 'row_remap_failure', 'gpu-hbm3-memory', 'Row remapping failure (DCGM)', 0.85::float8, 'https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/feature-overview.html', 700),
    ('dcgm', 'dcgm-thermal', '', NULL::integer, 'thermal', 'gpu-thermal-interface-sensor', 'Thermal limit (DCGM)', 0.6::float8, 'https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/feature-overview.html', 710)
) AS v(kind, name, pattern, xid, dcgm_kind, category, component, weight, source, position)
JOIN logbook_rootcause AS rc ON rc.slug = v.category AND rc.project_id IS NULL
ON CONFLICT DO NOTHING;
"""

COPY_PATTERNS = """
INSERT INTO logbook_triagerule
    (project_id, kind, name, pattern, xid, dcgm_kind, root_cause_id, component, weight,
     enabled, source, builtin, position, created_at, updated_at)
SELECT NULL, 'message', 'pattern-' || id, pattern, NULL, '', root_cause_id, component, weight,
       enabled, note, FALSE, 100000 + id, created_at, created_at
FROM logbook_triagepattern;
"""
UNCOPY_PATTERNS = """
INSERT INTO logbook_triagepattern
    (id, pattern, component, weight, enabled, note, created_at, root_cause_id)
SELECT substring(name FROM 9)::bigint, pattern, component, weight, enabled, left(source, 500),
       created_at, root_cause_id
FROM logbook_triagerule
WHERE project_id IS NULL AND NOT builtin AND kind = 'message' AND name LIKE 'pattern-%';
"""
# Reversed, the deferred foreign-key checks of these deletes fire now: the table is altered
# next, which PostgreSQL refuses while it has pending trigger events.
UNSEED = "DELETE FROM logbook_triagerule WHERE builtin; SET CONSTRAINTS ALL IMMEDIATE;"
# What this migration does to the built-in rules, in order: tests/logbook/test_triage_rules.py
# replays every logbook migration's RULES_SQL and compares the rows with the catalogue.
RULES_SQL = [BUILTIN_RULES]


class Migration(migrations.Migration):
    dependencies = [
        ("logbook", "0018_alter_auditevent_entity_alter_webhookdelivery_event"),
        ("telemetry", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="TriageRule",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("message", "Message pattern"),
                            ("xid", "XID code"),
                            ("dcgm", "DCGM event kind"),
                        ],
                        default="message",
                        max_length=8,
                    ),
                ),
                ("name", models.SlugField(max_length=64)),
                (
                    "pattern",
                    models.CharField(
                        blank=True,
                        help_text="RE2 regular expression (message rules)",
                        max_length=500,
                    ),
                ),
                ("xid", models.PositiveIntegerField(blank=True, null=True)),
                ("dcgm_kind", models.CharField(blank=True, max_length=32)),
                ("component", models.CharField(blank=True, max_length=200)),
                ("weight", models.FloatField(default=0.7)),
                ("enabled", models.BooleanField(default=True)),
                (
                    "source",
                    models.CharField(
                        blank=True, help_text="Where the rule comes from", max_length=500
                    ),
                ),
                ("builtin", models.BooleanField(default=False)),
                ("position", models.PositiveIntegerField(default=1000)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "ordering": ["position", "pk"],
            },
        ),
        migrations.CreateModel(
            name="TriageRuleSetting",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("enabled", models.BooleanField(default=True)),
                ("weight", models.FloatField(blank=True, null=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
        ),
        migrations.AddField(
            model_name="rootcause",
            name="family",
            field=models.CharField(
                choices=[
                    ("gpu", "The GPU's own faults"),
                    ("host", "The host's faults"),
                    ("network", "The network's faults"),
                    ("software", "Software"),
                    ("job", "The job's data, config and operations"),
                    ("symptom", "Symptoms (a stall nobody explained)"),
                ],
                default="software",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="rootcause",
            name="project",
            field=models.ForeignKey(
                blank=True,
                help_text="Empty: site-wide (superusers only)",
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="telemetry.project",
            ),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="entity",
            field=models.CharField(
                choices=[
                    ("interruption", "Incident"),
                    ("logbook_entry", "Logbook entry"),
                    ("annotation", "Annotation"),
                    ("sdc_replay", "SDC record"),
                    ("host", "Host"),
                    ("device", "Device"),
                    ("alert_rule", "Alert rule"),
                    ("slowdown", "Slowdown"),
                    ("triage_rule", "Triage rule"),
                    ("root_cause", "Category"),
                ],
                max_length=16,
            ),
        ),
        migrations.AlterField(
            model_name="rootcause",
            name="name",
            field=models.CharField(max_length=100),
        ),
        migrations.AlterField(
            model_name="rootcause",
            name="slug",
            field=models.SlugField(max_length=64),
        ),
        migrations.AddConstraint(
            model_name="rootcause",
            constraint=models.UniqueConstraint(
                condition=models.Q(("project__isnull", True)),
                fields=("slug",),
                name="root_cause_site_slug",
            ),
        ),
        migrations.AddConstraint(
            model_name="rootcause",
            constraint=models.UniqueConstraint(
                condition=models.Q(("project__isnull", True)),
                fields=("name",),
                name="root_cause_site_name",
            ),
        ),
        migrations.AddConstraint(
            model_name="rootcause",
            constraint=models.UniqueConstraint(
                condition=models.Q(("project__isnull", False)),
                fields=("project", "slug"),
                name="root_cause_project_slug",
            ),
        ),
        migrations.AddConstraint(
            model_name="rootcause",
            constraint=models.UniqueConstraint(
                condition=models.Q(("project__isnull", False)),
                fields=("project", "name"),
                name="root_cause_project_name",
            ),
        ),
        migrations.AddField(
            model_name="triagerule",
            name="project",
            field=models.ForeignKey(
                blank=True,
                help_text="Empty: site-wide (superusers only)",
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="telemetry.project",
            ),
        ),
        migrations.AddField(
            model_name="triagerule",
            name="root_cause",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="logbook.rootcause",
            ),
        ),
        migrations.AddField(
            model_name="triagerulesetting",
            name="project",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="telemetry.project",
            ),
        ),
        migrations.AddField(
            model_name="triagerulesetting",
            name="rule",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="settings",
                to="logbook.triagerule",
            ),
        ),
        migrations.AddConstraint(
            model_name="triagerule",
            constraint=models.CheckConstraint(
                condition=models.Q(("weight__gt", 0), ("weight__lte", 1)),
                name="triage_rule_weight_in_unit_range",
            ),
        ),
        migrations.AddConstraint(
            model_name="triagerule",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("kind", "message"), models.Q(("pattern", ""), _negated=True)),
                    models.Q(("kind", "xid"), ("xid__isnull", False)),
                    models.Q(("kind", "dcgm"), models.Q(("dcgm_kind", ""), _negated=True)),
                    _connector="OR",
                ),
                name="triage_rule_kind_has_its_key",
            ),
        ),
        migrations.AddConstraint(
            model_name="triagerule",
            constraint=models.UniqueConstraint(
                condition=models.Q(("project__isnull", True)),
                fields=("name",),
                name="triage_rule_site_name",
            ),
        ),
        migrations.AddConstraint(
            model_name="triagerule",
            constraint=models.UniqueConstraint(
                condition=models.Q(("project__isnull", False)),
                fields=("project", "name"),
                name="triage_rule_project_name",
            ),
        ),
        migrations.AddConstraint(
            model_name="triagerulesetting",
            constraint=models.UniqueConstraint(
                fields=("project", "rule"), name="triage_rule_setting_unique"
            ),
        ),
        migrations.AddConstraint(
            model_name="triagerulesetting",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("weight__isnull", True),
                    models.Q(("weight__gt", 0), ("weight__lte", 1)),
                    _connector="OR",
                ),
                name="triage_rule_setting_weight_in_unit_range",
            ),
        ),
        migrations.RunSQL(FAMILIES, migrations.RunSQL.noop),
        migrations.RunSQL(BUILTIN_RULES, UNSEED),
        migrations.RunSQL(COPY_PATTERNS, UNCOPY_PATTERNS),
        # No RemoveField of root_cause first: reversed, DeleteModel recreates the table from
        # the state before it, and its unique (pattern, root_cause) needs that column.
        migrations.DeleteModel(
            name="TriagePattern",
        ),
    ]
