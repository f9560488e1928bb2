"""Short runbooks for the Llama 3 Table 5 categories, from public vendor guidance (each cites
its source). Seeded into RootCause.runbook by migration 0013 and by root_causes_seed; admins
edit them afterwards, so the seed never overwrites a runbook that is not empty.

Each says what to check, what to quarantine and when to page the vendor."""

from __future__ import annotations

XID = "[NVIDIA XID catalog](https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html)"
DIAG = "[DCGM diagnostics](https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html)"
DCGM_DEBUG = "[DCGM debugging](https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/debugging-and-troubleshooting.html)"
MEMORY = "[NVIDIA GPU memory error management](https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html)"
NCCL = "[NCCL troubleshooting](https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html)"
TORCH = "[PyTorch ProcessGroupNCCL variables](https://pytorch.org/docs/stable/torch_nccl_environment_variables.html)"
RAS = "[Linux RAS](https://docs.kernel.org/admin-guide/ras.html)"
LLAMA3 = "[Llama 3 paper, §3.3.4](https://arxiv.org/abs/2407.21783)"

RUNBOOKS: dict[str, str] = {
    "faulty-gpu": f"""\
**Check** the host's kernel log for the XID (`dmesg | grep -i xid`) and look the code up in
the {XID}: 79 (fallen off the bus) and 74 (NVLink) need a GPU reset or node reboot.
Run `dcgmi diag -r 3` on the host after the reset ({DIAG}).

**Quarantine** the host (Fleet → host → Quarantine) before the job restarts; resume from the
last checkpoint on a spare.

**Page the vendor** if the XID repeats after a reset or the diagnostic fails: attach
`nvidia-bug-report.log.gz` ({DCGM_DEBUG}).""",
    "gpu-hbm3-memory": f"""\
**Check** `nvidia-smi -q -d ECC,ROW_REMAPPER`: uncorrectable errors, pending remaps and
remapping failures (XID 48, 63, 64, 94, 95; {XID}).

**Quarantine** the GPU if a row remap is pending (it applies at the next GPU reset) or
remapping failed (XID 64): reset, then `dcgmi diag -r 3` ({MEMORY}).

**Page the vendor** (RMA) on a remapping failure or when remapped rows keep growing.""",
    "gpu-sram-memory": f"""\
**Check** `nvidia-smi -q -d ECC` for SRAM (volatile and aggregate) uncorrectable counts;
XID 94/95 say whether the error was contained ({XID}).

**Quarantine** the GPU: an SRAM error is not fixed by row remapping. Reset and run
`dcgmi diag -r 3` ({DIAG}).

**Page the vendor** if SRAM uncorrectable errors recur after the reset.""",
    "gpu-system-processor": f"""\
**Check** the kernel log for XID 119/120 (GSP RPC timeout / GSP error; {XID}) and the driver
version: GSP faults are often fixed by a driver update.

**Quarantine** the host until the GPU is reset (a reboot clears the GSP state).

**Page the vendor** with `nvidia-bug-report.log.gz` if it recurs on the current driver
({DCGM_DEBUG}).""",
    "silent-data-corruption": f"""\
**Check** the SDC record: replay the step on other hardware and compare the result; a
mismatch that follows the device is hardware ({LLAMA3}).

**Quarantine** the suspected device before restarting from a checkpoint saved before the
first divergent step; run `dcgmi diag -r 4` on it ({DIAG}).

**Page the vendor** with the replay evidence when the replay confirms it.""",
    "gpu-thermal-interface-sensor": f"""\
**Check** DCGM's temperature and clock-throttle reasons for the GPU (HW thermal slowdown)
and compare with its neighbours: one hot GPU is its thermal interface or sensor, a hot
chassis is cooling ({DIAG}).

**Quarantine** the GPU if it throttles under normal load.

**Page the vendor** for a thermal interface rework or sensor replacement.""",
    "nccl-watchdog-timeout": f"""\
**Check** what stopped the collective: XIDs and link errors on the job's hosts in the
minutes before, the ranks that stopped reporting first, stragglers. Re-run with
`TORCH_NCCL_DUMP_ON_TIMEOUT=1` and `NCCL_DEBUG=INFO` to find the culprit rank ({TORCH};
{NCCL}).

**Quarantine** only the hardware the evidence names; a bare timeout names none.

**Page the vendor** only when a host or link is identified.""",
    "network-switch-cable": f"""\
**Check** the port counters on both ends (`ibstat`, `perfquery`, symbol and link-down
counts) and the switch log for flaps; run `ib_write_bw` between the hosts ({NCCL}).

**Quarantine** the hosts behind the flapping port, or drain the switch.

**Page the network vendor** or replace the cable/optic when errors persist after reseating.""",
    "nic": f"""\
**Check** `ibstat`/`ibv_devinfo` on the host (port state, firmware) and `dmesg` for mlx5
health or command timeouts ({NCCL}).

**Quarantine** the host; reset the adapter or reboot.

**Page the vendor** if the adapter keeps failing its health check.""",
    "host-maintenance": f"""\
**Check** the scheduler and cluster events: was the host drained, rebooted or migrated
without notice? ({LLAMA3})

**Quarantine** nothing; restart on the remaining hosts.

**Ask the cluster operators** to announce maintenance windows so they are filed as planned.""",
    "software-bug": f"""\
**Check** the traceback and the commit the attempt ran; reproduce on a small scale.
XID 13/31 and illegal memory accesses are usually the application's own ({XID}).

**Quarantine** nothing; roll back the change or fix forward.

**Page** the framework's maintainers with a minimal reproduction if the bug is theirs.""",
    "dependency": f"""\
**Check** the versions the attempt ran (driver, CUDA, NCCL, framework) against the last
good attempt; `NCCL_DEBUG=INFO` prints NCCL's version ({NCCL}).

**Quarantine** nothing; pin the last good versions in the image.

**Page** the dependency's maintainers with the version pair that fails.""",
    "ssd": f"""\
**Check** `nvme smart-log` (critical warning, media errors, percentage used) and `dmesg`
for I/O errors on the device ({RAS}).

**Quarantine** the host; checkpoints written there since the first error are suspect.

**Page the vendor** to replace the drive.""",
    "power-supply": f"""\
**Check** the BMC's event log (`ipmitool sel list`) for PSU faults and power loss, and
DCGM power readings ({DIAG}).

**Quarantine** the host until the PSU is replaced.

**Page the vendor** or datacenter operations to replace it.""",
    "server-chassis": f"""\
**Check** the BMC's event log for fan, baseboard and chassis faults (`ipmitool sel list`).

**Quarantine** the host.

**Page the vendor** for a chassis or baseboard repair ({LLAMA3}).""",
    "io-expansion-board": f"""\
**Check** `dmesg` for PCIe AER errors and `lspci -vv` for degraded links on the GPU and NIC
paths ({RAS}); XID 79 on several GPUs behind one switch points here ({XID}).

**Quarantine** the host.

**Page the vendor** to replace the board, switch or riser.""",
    "cpu": f"""\
**Check** the machine-check log (`rasdaemon`/`mcelog`, `ras-mc-ctl --errors`) for CPU bank
errors ({RAS}).

**Quarantine** the host.

**Page the vendor** if the CPU reports uncorrected errors.""",
    "system-memory": f"""\
**Check** EDAC counters (`ras-mc-ctl --error-count`) for the DIMM with uncorrected or rising
corrected errors ({RAS}).

**Quarantine** the host.

**Page the vendor** to replace the DIMM named in the log.""",
}
