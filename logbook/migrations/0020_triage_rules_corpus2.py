"""Ships issue 37's second round of built-in message rules (docs/triage.md, "Shipping a rule
change"): 18 new rules from the public tune corpus (tests/data/triage_corpus2.jsonl, its tune
part only) and the sources that print each message, three widened patterns, and the
positions that keep every rule in its family's place. SQL printed by
`manage.py triage_rules_sql`, frozen here."""

from django.db import migrations

# tests/logbook/test_triage_rules.py replays every logbook migration's RULES_SQL in order.
RULES_SQL = [
    r"""
UPDATE logbook_triagerule SET pattern = 'cuda out of memory|OutOfMemoryError|cudaErrorMemoryAllocation|out of memory.{0,40}(?:gpu|cuda|device)|CUBLAS_STATUS_ALLOC_FAILED|cuda failure.{0,10}out of memory', updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'gpu-oom';
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'xla-oom', (SELECT id FROM logbook_rootcause WHERE slug = 'software-bug' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'RESOURCE_EXHAUSTED.{0,120}(?:memory|allocat|reserve)|ran out of memory in memory space|out of memory while trying to allocate|error allocating device buffer', NULL, '', 'Device out of memory (XLA)', 0.65, 'https://openxla.org/xla/errors', 140);
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'host-oom', (SELECT id FROM logbook_rootcause WHERE slug = 'software-bug' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'out of memory: kill(?:ed)? process|invoked oom-killer|oom_reaper: reaped', NULL, '', 'Host out of memory (OOM killer)', 0.55, 'https://docs.kernel.org/admin-guide/mm/concepts.html#oom-killer', 150);
UPDATE logbook_triagerule SET position = 160, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'traceback';
UPDATE logbook_triagerule SET position = 170, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'python-error';
UPDATE logbook_triagerule SET position = 180, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'segfault';
UPDATE logbook_triagerule SET pattern = 'deadlock|mismatched collective|collective.{0,30}mismatch|desync|mismatch between collectives|collectives differ|different (?:number of|order)', position = 190, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'deadlock';
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'compiler-bug', (SELECT id FROM logbook_rootcause WHERE slug = 'software-bug' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', '(?:likely|probably) an? (?:\w+ )?compiler bug|please file a bug', NULL, '', 'Compiler or runtime bug', 0.45, 'https://openxla.org/xla/errors', 200);
UPDATE logbook_triagerule SET position = 210, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dependency';
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'cuda-library-internal', (SELECT id FROM logbook_rootcause WHERE slug = 'dependency' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'CUDNN_STATUS_INTERNAL_ERROR|CUBLAS_STATUS_INTERNAL_ERROR|CUDNN_STATUS_NOT_INITIALIZED', NULL, '', 'CUDA library internal error', 0.45, 'https://docs.nvidia.com/deeplearning/cudnn/latest/api/cudnn-graph-library.html', 220);
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'fabric-manager', (SELECT id FROM logbook_rootcause WHERE slug = 'dependency' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'system not yet initialized|cudaErrorSystemNotReady|CUDA_ERROR_SYSTEM_NOT_READY|cuda runtime error \(802\)|fabric ?manager', NULL, '', 'Fabric Manager missing (CUDA 802)', 0.6, 'https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html', 230);
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'artifact-version', (SELECT id FROM logbook_rootcause WHERE slug = 'dependency' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'unknown vhlo|bytecode version \d+ produced by|StableHLO_v\d', NULL, '', 'Runtime older than its compiler', 0.5, 'https://openxla.org/xla/errors', 240);
UPDATE logbook_triagerule SET position = 250, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'ib-retry';
UPDATE logbook_triagerule SET position = 260, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'link-flap';
UPDATE logbook_triagerule SET position = 270, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'nccl-cuda';
UPDATE logbook_triagerule SET position = 280, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'nic-port';
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'ib-device-missing', (SELECT id FROM logbook_rootcause WHERE slug = 'nic' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'sys files not found \(/sys/class/infiniband|no IB devices found|(?:ibstat|ibv_devinfo|ibv_devices)\S*:? .{0,40}(?:no \w+ devices|not found|failed)', NULL, '', 'IB adapter not present', 0.5, 'https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html', 290);
UPDATE logbook_triagerule SET position = 300, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'nic';
UPDATE logbook_triagerule SET position = 310, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'nvme';
UPDATE logbook_triagerule SET pattern = '(?:ext4|xfs|lustre|nfs|gpfs|beegfs|weka|fuse)[-\w]*.{0,60}(?:error|fail|timeout|corrupt|stale)|stale (?:nfs )?file handle|errno 116\b|no space left on device|disk quota exceeded|read-only file system|input/output error|blk_update_request|buffer i/o error|checkpoint.{0,60}(?:save|load|upload|write|read).{0,40}(?:fail|error|timeout)|s3.{0,40}(?:error|timeout|slowdown)|PytorchStreamWriter failed writing|file write failed', position = 320, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'filesystem';
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'checkpoint-truncated', (SELECT id FROM logbook_rootcause WHERE slug = 'storage' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'failed finding central directory|PytorchStreamReader failed reading', NULL, '', 'Checkpoint file incomplete', 0.55, 'https://pytorch.org/docs/stable/notes/serialization.html', 330);
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'object-store', (SELECT id FROM logbook_rootcause WHERE slug = 'storage' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'botocore\.exceptions\.\w+|\(SlowDown\)|storage\.googleapis\.com|googleapis\.com/(?:upload/)?storage|\bServiceUnavailable\b|s3\.amazonaws\.com|\bNoSuchKey\b', NULL, '', 'Object store (S3/GCS)', 0.55, 'https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html', 340);
UPDATE logbook_triagerule SET position = 350, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'mce-memory';
UPDATE logbook_triagerule SET position = 360, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'memory-controller';
UPDATE logbook_triagerule SET position = 370, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dimm';
UPDATE logbook_triagerule SET position = 380, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'mce-cpu';
UPDATE logbook_triagerule SET position = 390, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'power';
UPDATE logbook_triagerule SET position = 400, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'gpu-thermal';
UPDATE logbook_triagerule SET position = 410, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'chassis';
UPDATE logbook_triagerule SET position = 420, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'pcie';
UPDATE logbook_triagerule SET position = 430, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'sdc';
UPDATE logbook_triagerule SET pattern = 'loss (?:is |became |went )?(?:nan|inf)|nan loss|loss spike|\bnan in (?:\w+ ){0,2}(?:grad|loss)|(?:found|detected) (?:a )?nan\b|(?:grad(?:ient)?[ _]norm|loss).{0,30}(?:nan|inf|explod|diverg|spike)|diverged|divergence', position = 440, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'loss-divergence';
UPDATE logbook_triagerule SET position = 450, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'loss-scale';
UPDATE logbook_triagerule SET position = 460, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'data-pipeline-stack';
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'dataset-files', (SELECT id FROM logbook_rootcause WHERE slug = 'data-pipeline' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'parquet magic bytes|ArrowInvalid|\bArrow\w*Error|corrupt snappy|dataset does not exist|\.idx and \.bin|index file doesn''t match expected format', NULL, '', 'Dataset files unreadable', 0.6, 'https://arrow.apache.org/docs/python/api/misc.html#exceptions', 470);
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'dataset-hub', (SELECT id FROM logbook_rootcause WHERE slug = 'data-pipeline' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'HfHubHTTPError|huggingface\.co/(?:api/)?datasets/\S*', NULL, '', 'Dataset host refused', 0.55, 'https://huggingface.co/docs/huggingface_hub/package_reference/utilities', 480);
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'labels-out-of-range', (SELECT id FROM logbook_rootcause WHERE slug = 'data-pipeline' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'ClassNLLCriterion|t >= 0 && t < n_classes|target -?\d+ is out of bounds', NULL, '', 'Labels out of range', 0.55, 'https://docs.python.org/3/library/exceptions.html', 490);
UPDATE logbook_triagerule SET position = 500, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'data-pipeline';
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'open-files-limit', (SELECT id FROM logbook_rootcause WHERE slug = 'config-change' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'too many open files|errno 24\b|\bEMFILE\b', NULL, '', 'Open-files limit (ulimit -n)', 0.6, 'https://docs.python.org/3/library/exceptions.html', 510);
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'shm-limit', (SELECT id FROM logbook_rootcause WHERE slug = 'config-change' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'insufficient shared memory|shared memory limit|/dev/shm|shm[-_]size', NULL, '', 'Shared-memory limit (/dev/shm)', 0.5, 'https://pytorch.org/docs/stable/data.html#multi-process-data-loading', 520);
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'nccl-loopback', (SELECT id FROM logbook_rootcause WHERE slug = 'config-change' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'connect to 127\.0\.0\.1|using \[0\]lo:', NULL, '', 'NCCL on the loopback interface', 0.55, 'https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html', 530);
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'roce-gid', (SELECT id FROM logbook_rootcause WHERE slug = 'config-change' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'ibv_modify_qp failed.{0,40}(?:timed out|unreachable|errno 110)|NCCL_IB_GID_INDEX|GID index', NULL, '', 'RoCE GID or rail setting', 0.65, 'https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html', 540);
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'ofi-init', (SELECT id FROM logbook_rootcause WHERE slug = 'config-change' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'NET/OFI.{0,120}(?:fi_getinfo|couldn''t open AV|creating new endpoint.{0,60}failed)', NULL, '', 'EFA/libfabric not available', 0.5, 'https://github.com/aws/aws-ofi-nccl/blob/master/doc/efa-env-var.md', 550);
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'slurm-cgroup-oom', (SELECT id FROM logbook_rootcause WHERE slug = 'config-change' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'oom[-_]kill events? in (?:step|StepId)|cgroup out-of-memory handler|task \d+: Out Of Memory', NULL, '', 'Job memory request (Slurm cgroup)', 0.7, 'https://slurm.schedmd.com/cgroup.conf.html', 560);
UPDATE logbook_triagerule SET position = 570, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'preemption';
UPDATE logbook_triagerule SET position = 580, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'sigterm';
UPDATE logbook_triagerule SET position = 590, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'host-maintenance';
UPDATE logbook_triagerule SET position = 600, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-8';
UPDATE logbook_triagerule SET position = 610, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-13';
UPDATE logbook_triagerule SET position = 620, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-31';
UPDATE logbook_triagerule SET position = 630, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-32';
UPDATE logbook_triagerule SET position = 640, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-38';
UPDATE logbook_triagerule SET position = 650, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-43';
UPDATE logbook_triagerule SET position = 660, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-45';
UPDATE logbook_triagerule SET position = 670, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-46';
UPDATE logbook_triagerule SET position = 680, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-48';
UPDATE logbook_triagerule SET position = 690, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-61';
UPDATE logbook_triagerule SET position = 700, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-62';
UPDATE logbook_triagerule SET position = 710, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-63';
UPDATE logbook_triagerule SET position = 720, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-64';
UPDATE logbook_triagerule SET position = 730, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-69';
UPDATE logbook_triagerule SET position = 740, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-74';
UPDATE logbook_triagerule SET position = 750, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-79';
UPDATE logbook_triagerule SET position = 760, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-92';
UPDATE logbook_triagerule SET position = 770, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-94';
UPDATE logbook_triagerule SET position = 780, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-95';
UPDATE logbook_triagerule SET position = 790, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-119';
UPDATE logbook_triagerule SET position = 800, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-120';
UPDATE logbook_triagerule SET position = 810, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-140';
UPDATE logbook_triagerule SET position = 820, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-143';
UPDATE logbook_triagerule SET position = 830, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-144';
UPDATE logbook_triagerule SET position = 840, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-145';
UPDATE logbook_triagerule SET position = 850, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-149';
UPDATE logbook_triagerule SET position = 860, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dcgm-ecc-uncorrectable';
UPDATE logbook_triagerule SET position = 870, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dcgm-row-remap';
UPDATE logbook_triagerule SET position = 880, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dcgm-row-remap-failure';
UPDATE logbook_triagerule SET position = 890, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dcgm-thermal';
"""
]
REVERSE_SQL = r"""
DELETE FROM logbook_triagerule WHERE builtin AND project_id IS NULL AND name IN ('xla-oom', 'host-oom', 'compiler-bug', 'cuda-library-internal', 'fabric-manager', 'artifact-version', 'ib-device-missing', 'checkpoint-truncated', 'object-store', 'dataset-files', 'dataset-hub', 'labels-out-of-range', 'open-files-limit', 'shm-limit', 'nccl-loopback', 'roce-gid', 'ofi-init', 'slurm-cgroup-oom');
UPDATE logbook_triagerule SET pattern = 'cuda out of memory|OutOfMemoryError|cudaErrorMemoryAllocation|out of memory.{0,40}(?:gpu|cuda|device)|CUBLAS_STATUS_ALLOC_FAILED', updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'gpu-oom';
UPDATE logbook_triagerule SET position = 140, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'traceback';
UPDATE logbook_triagerule SET position = 150, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'python-error';
UPDATE logbook_triagerule SET position = 160, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'segfault';
UPDATE logbook_triagerule SET pattern = 'deadlock|mismatched collective|collective.{0,30}mismatch|desync|different (?:number of|order)', position = 170, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'deadlock';
UPDATE logbook_triagerule SET position = 180, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dependency';
UPDATE logbook_triagerule SET position = 190, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'ib-retry';
UPDATE logbook_triagerule SET position = 200, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'link-flap';
UPDATE logbook_triagerule SET position = 210, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'nccl-cuda';
UPDATE logbook_triagerule SET position = 220, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'nic-port';
UPDATE logbook_triagerule SET position = 230, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'nic';
UPDATE logbook_triagerule SET position = 240, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'nvme';
UPDATE logbook_triagerule SET pattern = '(?:ext4|xfs|lustre|nfs|gpfs|beegfs|weka|fuse)[-\w]*.{0,60}(?:error|fail|timeout|corrupt|stale)|stale file handle|no space left on device|disk quota exceeded|read-only file system|input/output error|blk_update_request|buffer i/o error|checkpoint.{0,60}(?:save|load|upload|write|read).{0,40}(?:fail|error|timeout)|s3.{0,40}(?:error|timeout|slowdown)|PytorchStreamWriter failed writing|file write failed', position = 250, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'filesystem';
UPDATE logbook_triagerule SET position = 260, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'mce-memory';
UPDATE logbook_triagerule SET position = 270, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'memory-controller';
UPDATE logbook_triagerule SET position = 280, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dimm';
UPDATE logbook_triagerule SET position = 290, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'mce-cpu';
UPDATE logbook_triagerule SET position = 300, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'power';
UPDATE logbook_triagerule SET position = 310, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'gpu-thermal';
UPDATE logbook_triagerule SET position = 320, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'chassis';
UPDATE logbook_triagerule SET position = 330, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'pcie';
UPDATE logbook_triagerule SET position = 340, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'sdc';
UPDATE logbook_triagerule SET pattern = 'loss (?:is |became |went )?(?:nan|inf)|nan loss|loss spike|(?:grad(?:ient)?[ _]norm|loss).{0,30}(?:nan|inf|explod|diverg|spike)|diverged|divergence', position = 350, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'loss-divergence';
UPDATE logbook_triagerule SET position = 360, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'loss-scale';
UPDATE logbook_triagerule SET position = 370, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'data-pipeline-stack';
UPDATE logbook_triagerule SET position = 380, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'data-pipeline';
UPDATE logbook_triagerule SET position = 390, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'preemption';
UPDATE logbook_triagerule SET position = 400, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'sigterm';
UPDATE logbook_triagerule SET position = 410, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'host-maintenance';
UPDATE logbook_triagerule SET position = 420, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-8';
UPDATE logbook_triagerule SET position = 430, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-13';
UPDATE logbook_triagerule SET position = 440, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-31';
UPDATE logbook_triagerule SET position = 450, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-32';
UPDATE logbook_triagerule SET position = 460, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-38';
UPDATE logbook_triagerule SET position = 470, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-43';
UPDATE logbook_triagerule SET position = 480, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-45';
UPDATE logbook_triagerule SET position = 490, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-46';
UPDATE logbook_triagerule SET position = 500, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-48';
UPDATE logbook_triagerule SET position = 510, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-61';
UPDATE logbook_triagerule SET position = 520, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-62';
UPDATE logbook_triagerule SET position = 530, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-63';
UPDATE logbook_triagerule SET position = 540, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-64';
UPDATE logbook_triagerule SET position = 550, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-69';
UPDATE logbook_triagerule SET position = 560, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-74';
UPDATE logbook_triagerule SET position = 570, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-79';
UPDATE logbook_triagerule SET position = 580, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-92';
UPDATE logbook_triagerule SET position = 590, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-94';
UPDATE logbook_triagerule SET position = 600, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-95';
UPDATE logbook_triagerule SET position = 610, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-119';
UPDATE logbook_triagerule SET position = 620, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-120';
UPDATE logbook_triagerule SET position = 630, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-140';
UPDATE logbook_triagerule SET position = 640, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-143';
UPDATE logbook_triagerule SET position = 650, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-144';
UPDATE logbook_triagerule SET position = 660, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-145';
UPDATE logbook_triagerule SET position = 670, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-149';
UPDATE logbook_triagerule SET position = 680, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dcgm-ecc-uncorrectable';
UPDATE logbook_triagerule SET position = 690, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dcgm-row-remap';
UPDATE logbook_triagerule SET position = 700, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dcgm-row-remap-failure';
UPDATE logbook_triagerule SET position = 710, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dcgm-thermal';
"""


class Migration(migrations.Migration):
    dependencies = [("logbook", "0019_triage_rules_as_data")]

    operations = [migrations.RunSQL(RULES_SQL[0], REVERSE_SQL)]
