"""Ships general message rules for issue 37 that no tune message asked for (docs/triage.md,
"Shipping a rule change"): the wordings the software itself prints for a GPU the driver
could not initialise, NVML/driver and PyTorch build mismatches, nvidia-smi's and DCGM's
thermal reasons, a dataset's __getitem__ and undecodable shards, ranks launched on GPUs they
cannot have, a rendezvous port in use, cloud spot and Slurm requeue notices, and autograd's
NaN anomaly. SQL printed by `manage.py triage_rules_sql`, frozen here."""

from django.db import migrations

# tests/logbook/test_triage_rules.py replays every logbook migration's RULES_SQL in order.
RULES_SQL = [
    r"""
UPDATE logbook_triagerule SET pattern = 'cudaErrorHardwareStackError|hardware stack error|uncorrectable nvlink|nvlink.{0,40}(?:error|fatal|down|fail|inactive)|gpu.{0,20}(?:hardware|board) (?:failure|fault|error)|faulty gpu|bad gpu|gpu.{0,30}requires? (?:a )?reset|reset required|RmInitAdapter failed|GPU initialization failed|failed to initialize the GPU', updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'gpu-hardware';
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'driver-build-mismatch', (SELECT id FROM logbook_rootcause WHERE slug = 'dependency' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'driver/library version mismatch|couldn''t communicate with the NVIDIA driver|NVIDIA driver on your system is too old|found no NVIDIA driver|not compatible with the current PyTorch installation|compiled (?:against|with) .{0,40}(?:version|cuda)|built (?:against|for) .{0,40}version', NULL, '', 'Driver or build mismatch', 0.6, 'https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html', 220);
UPDATE logbook_triagerule SET position = 230, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'cuda-library-internal';
UPDATE logbook_triagerule SET position = 240, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'fabric-manager';
UPDATE logbook_triagerule SET position = 250, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'artifact-version';
UPDATE logbook_triagerule SET position = 260, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'ib-retry';
UPDATE logbook_triagerule SET position = 270, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'link-flap';
UPDATE logbook_triagerule SET position = 280, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'nccl-cuda';
UPDATE logbook_triagerule SET position = 290, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'nic-port';
UPDATE logbook_triagerule SET position = 300, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'ib-device-missing';
UPDATE logbook_triagerule SET position = 310, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'nic';
UPDATE logbook_triagerule SET position = 320, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'nvme';
UPDATE logbook_triagerule SET position = 330, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'filesystem';
UPDATE logbook_triagerule SET position = 340, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'checkpoint-truncated';
UPDATE logbook_triagerule SET position = 350, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'object-store';
UPDATE logbook_triagerule SET position = 360, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'mce-memory';
UPDATE logbook_triagerule SET position = 370, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'memory-controller';
UPDATE logbook_triagerule SET position = 380, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dimm';
UPDATE logbook_triagerule SET position = 390, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'mce-cpu';
UPDATE logbook_triagerule SET position = 400, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'power';
UPDATE logbook_triagerule SET pattern = '(?:gpu|hbm|memory).{0,40}(?:over ?temp|temperature|thermal)|(?:thermal|temperature).{0,40}(?:gpu|slowdown|throttl|shutdown|limit|sensor)|hw thermal slowdown|thermal interface|heatsink|thermal paste|sw thermal slowdown|thermal violation|overheat\w*|junction temp\w*|over[- ]temperature|slowdown temp', position = 410, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'gpu-thermal';
UPDATE logbook_triagerule SET position = 420, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'chassis';
UPDATE logbook_triagerule SET position = 430, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'pcie';
UPDATE logbook_triagerule SET position = 440, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'sdc';
UPDATE logbook_triagerule SET position = 450, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'loss-divergence';
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'anomaly-nan', (SELECT id FROM logbook_rootcause WHERE slug = 'loss-divergence' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'returned nan values|returned an invalid gradient|function ''\w+'' returned nan', NULL, '', 'NaN produced in backward', 0.5, 'https://arxiv.org/abs/2407.21783', 460);
UPDATE logbook_triagerule SET position = 470, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'loss-scale';
UPDATE logbook_triagerule SET pattern = 'torch/utils/data/|dataloader\.py|_MultiProcessingDataLoaderIter|worker timed out after \d+ ?s|slower data loading|image file is truncated|cannot identify image file|in __getitem__|default_collate|collate_fn|datasets/(?:builder|arrow_dataset)\.py', position = 480, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'data-pipeline-stack';
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'data-decode', (SELECT id FROM logbook_rootcause WHERE slug = 'data-pipeline' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'DatasetGenerationError|tarfile\.ReadError|zlib\.error|Error -3 while decompressing|unexpected end of (?:data|file)|EOFError: Ran out of input|UnicodeDecodeError|JSONDecodeError', NULL, '', 'Data shard undecodable', 0.5, 'https://arrow.apache.org/docs/python/api/misc.html#exceptions', 490);
UPDATE logbook_triagerule SET position = 500, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dataset-files';
UPDATE logbook_triagerule SET position = 510, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dataset-hub';
UPDATE logbook_triagerule SET position = 520, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'labels-out-of-range';
UPDATE logbook_triagerule SET position = 530, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'data-pipeline';
UPDATE logbook_triagerule SET position = 540, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'open-files-limit';
UPDATE logbook_triagerule SET position = 550, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'shm-limit';
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'device-assignment', (SELECT id FROM logbook_rootcause WHERE slug = 'config-change' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'invalid device ordinal|cudaErrorInvalidDevice|duplicate GPU detected|both on CUDA device', NULL, '', 'Ranks and GPUs do not match', 0.6, 'https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html', 560);
INSERT INTO logbook_triagerule (project_id, name, root_cause_id, enabled, builtin, created_at, updated_at, kind, pattern, xid, dcgm_kind, component, weight, source, position) VALUES (NULL, 'rendezvous-address', (SELECT id FROM logbook_rootcause WHERE slug = 'config-change' AND project_id IS NULL), TRUE, TRUE, now(), now(), 'message', 'address already in use|EADDRINUSE|server socket has failed to (?:listen|bind)', NULL, '', 'Rendezvous address or port', 0.5, 'https://pytorch.org/docs/stable/torch_nccl_environment_variables.html', 570);
UPDATE logbook_triagerule SET position = 580, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'nccl-loopback';
UPDATE logbook_triagerule SET position = 590, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'roce-gid';
UPDATE logbook_triagerule SET position = 600, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'ofi-init';
UPDATE logbook_triagerule SET position = 610, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'slurm-cgroup-oom';
UPDATE logbook_triagerule SET pattern = '\bpreempted\b|preemption(?P<unless> ?cleanup)?|spot instance|\bevicted\b|spot interruption|interruption notice|termination notice|job requeue|requeued', position = 620, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'preemption';
UPDATE logbook_triagerule SET position = 630, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'sigterm';
UPDATE logbook_triagerule SET position = 640, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'host-maintenance';
UPDATE logbook_triagerule SET position = 650, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-8';
UPDATE logbook_triagerule SET position = 660, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-13';
UPDATE logbook_triagerule SET position = 670, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-31';
UPDATE logbook_triagerule SET position = 680, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-32';
UPDATE logbook_triagerule SET position = 690, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-38';
UPDATE logbook_triagerule SET position = 700, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-43';
UPDATE logbook_triagerule SET position = 710, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-45';
UPDATE logbook_triagerule SET position = 720, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-46';
UPDATE logbook_triagerule SET position = 730, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-48';
UPDATE logbook_triagerule SET position = 740, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-61';
UPDATE logbook_triagerule SET position = 750, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-62';
UPDATE logbook_triagerule SET position = 760, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-63';
UPDATE logbook_triagerule SET position = 770, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-64';
UPDATE logbook_triagerule SET position = 780, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-69';
UPDATE logbook_triagerule SET position = 790, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-74';
UPDATE logbook_triagerule SET position = 800, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-79';
UPDATE logbook_triagerule SET position = 810, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-92';
UPDATE logbook_triagerule SET position = 820, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-94';
UPDATE logbook_triagerule SET position = 830, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-95';
UPDATE logbook_triagerule SET position = 840, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-119';
UPDATE logbook_triagerule SET position = 850, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-120';
UPDATE logbook_triagerule SET position = 860, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-140';
UPDATE logbook_triagerule SET position = 870, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-143';
UPDATE logbook_triagerule SET position = 880, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-144';
UPDATE logbook_triagerule SET position = 890, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-145';
UPDATE logbook_triagerule SET position = 900, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'xid-149';
UPDATE logbook_triagerule SET position = 910, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dcgm-ecc-uncorrectable';
UPDATE logbook_triagerule SET position = 920, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dcgm-row-remap';
UPDATE logbook_triagerule SET position = 930, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dcgm-row-remap-failure';
UPDATE logbook_triagerule SET position = 940, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dcgm-thermal';
"""
]
REVERSE_SQL = r"""
DELETE FROM logbook_triagerule WHERE builtin AND project_id IS NULL AND name IN ('driver-build-mismatch', 'anomaly-nan', 'data-decode', 'device-assignment', 'rendezvous-address');
UPDATE logbook_triagerule SET pattern = 'cudaErrorHardwareStackError|hardware stack error|uncorrectable nvlink|nvlink.{0,40}(?:error|fatal|down|fail)|gpu.{0,20}(?:hardware|board) (?:failure|fault|error)|faulty gpu|bad gpu|gpu.{0,30}requires? (?:a )?reset|reset required', updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'gpu-hardware';
UPDATE logbook_triagerule SET position = 220, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'cuda-library-internal';
UPDATE logbook_triagerule SET position = 230, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'fabric-manager';
UPDATE logbook_triagerule SET position = 240, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'artifact-version';
UPDATE logbook_triagerule SET position = 250, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'ib-retry';
UPDATE logbook_triagerule SET position = 260, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'link-flap';
UPDATE logbook_triagerule SET position = 270, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'nccl-cuda';
UPDATE logbook_triagerule SET position = 280, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'nic-port';
UPDATE logbook_triagerule SET position = 290, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'ib-device-missing';
UPDATE logbook_triagerule SET position = 300, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'nic';
UPDATE logbook_triagerule SET position = 310, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'nvme';
UPDATE logbook_triagerule SET position = 320, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'filesystem';
UPDATE logbook_triagerule SET position = 330, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'checkpoint-truncated';
UPDATE logbook_triagerule SET position = 340, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'object-store';
UPDATE logbook_triagerule SET position = 350, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'mce-memory';
UPDATE logbook_triagerule SET position = 360, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'memory-controller';
UPDATE logbook_triagerule SET position = 370, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dimm';
UPDATE logbook_triagerule SET position = 380, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'mce-cpu';
UPDATE logbook_triagerule SET position = 390, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'power';
UPDATE logbook_triagerule SET pattern = '(?:gpu|hbm|memory).{0,40}(?:over ?temp|temperature|thermal)|(?:thermal|temperature).{0,40}(?:gpu|slowdown|throttl|shutdown|limit|sensor)|hw thermal slowdown|thermal interface|heatsink|thermal paste', position = 400, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'gpu-thermal';
UPDATE logbook_triagerule SET position = 410, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'chassis';
UPDATE logbook_triagerule SET position = 420, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'pcie';
UPDATE logbook_triagerule SET position = 430, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'sdc';
UPDATE logbook_triagerule SET position = 440, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'loss-divergence';
UPDATE logbook_triagerule SET position = 450, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'loss-scale';
UPDATE logbook_triagerule SET pattern = 'torch/utils/data/|dataloader\.py|_MultiProcessingDataLoaderIter|worker timed out after \d+ ?s|slower data loading|image file is truncated|cannot identify image file', position = 460, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'data-pipeline-stack';
UPDATE logbook_triagerule SET position = 470, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dataset-files';
UPDATE logbook_triagerule SET position = 480, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'dataset-hub';
UPDATE logbook_triagerule SET position = 490, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'labels-out-of-range';
UPDATE logbook_triagerule SET position = 500, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'data-pipeline';
UPDATE logbook_triagerule SET position = 510, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'open-files-limit';
UPDATE logbook_triagerule SET position = 520, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'shm-limit';
UPDATE logbook_triagerule SET position = 530, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'nccl-loopback';
UPDATE logbook_triagerule SET position = 540, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'roce-gid';
UPDATE logbook_triagerule SET position = 550, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'ofi-init';
UPDATE logbook_triagerule SET position = 560, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'slurm-cgroup-oom';
UPDATE logbook_triagerule SET pattern = '\bpreempted\b|preemption(?P<unless> ?cleanup)?|spot instance|\bevicted\b', position = 570, updated_at = now() WHERE builtin AND project_id IS NULL AND name = 'preemption';
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


class Migration(migrations.Migration):
    dependencies = [("logbook", "0020_triage_rules_corpus2")]

    operations = [migrations.RunSQL(RULES_SQL[0], REVERSE_SQL)]
