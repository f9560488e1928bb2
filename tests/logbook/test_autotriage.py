"""The auto-triage rules, without a database: what a message and the evidence around an
interruption point at."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from logbook import autotriage
from logbook.autotriage import EvidenceFact, IncidentFacts, MessageRule, suggest
from logbook.taxonomy import ROOT_CAUSE_SEEDS

AT = datetime(2024, 7, 1, 3, 0, tzinfo=UTC)
NCCL = (
    "[Rank 12] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=680, "
    "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 "
    "milliseconds before timing out."
)


def facts(message: str, hosts: tuple[str, ...] = ()) -> IncidentFacts:
    return IncidentFacts(message=message, occurred_at=AT, hosts=hosts)


@pytest.mark.parametrize(
    ("message", "category"),
    [
        (NCCL, "nccl-watchdog-timeout"),
        ("NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.", "faulty-gpu"),
        ("NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error", "gpu-hbm3-memory"),
        ("NVRM: Xid (PCI:0000:3b:00): 119, Timeout waiting for RPC", "gpu-system-processor"),
        ("NVRM: Xid (PCI:0000:3b:00): 120, GSP task exception", "gpu-system-processor"),
        ("NVRM: Xid (PCI:0000:3b:00): 95, pid=1, Uncontained: FBHUB. RST: Yes", "gpu-hbm3-memory"),
        ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "gpu-hbm3-memory"),
        ("RuntimeError: CUDA error: an illegal memory access was encountered", "software-bug"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "software-bug"),
        ("NCCL WARN NET/IB : Got completion from peer 10.0.0.7 with error 12, opcode 0, "
         "len 0, vendor err 129 (Recv) - transport retry counter exceeded", "network-switch-cable"),
        ("mlx5_core 0000:5e:00.0: mlx5_health_check: device's health compromised", "nic"),
        ("blk_update_request: I/O error, dev nvme0n1, sector 123456 op 0x1:(WRITE)", "ssd"),
        ("mce: [Hardware Error]: Machine check events logged", "cpu"),
        ("EDAC MC0: 1 UE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0", "system-memory"),
        ("GPU 3: HW Thermal Slowdown active, temperature 92 C", "gpu-thermal-interface-sensor"),
        ("ImportError: /usr/lib/libnccl.so.2: undefined symbol: ncclCommSplit", "dependency"),
        ("slurmstepd: error: *** JOB 1234 CANCELLED DUE TO PREEMPTION ***", "scheduler-preemption"),
        ("Traceback (most recent call last):\n  File \"train.py\", line 3\n"
         "AttributeError: 'NoneType' object has no attribute 'shape'", "software-bug"),
        ("sbatch: error: Batch job submission failed: Invalid partition name specified",
         "config-change"),
        ("srun: error: Unable to create step for job 77: Requested node configuration is not "
         "available", "config-change"),
        ("RuntimeError: An attempt has been made to start a new process before the current "
         "process has finished its bootstrapping phase.", "software-bug"),
    ],
)  # fmt: skip
def test_a_message_alone_names_its_category(message, category):
    suggestion = suggest(facts(message))
    assert suggestion is not None
    assert suggestion.category == category, suggestion.scores


def test_every_rule_points_at_a_shipped_category_and_compiles():
    slugs = {seed.slug for seed in ROOT_CAUSE_SEEDS}
    for rule in autotriage.BUILTIN_RULES:
        assert rule.category in slugs, rule.name
        assert autotriage.pattern_problem(rule.pattern) == "", rule.name
        assert 0 < rule.weight <= 1
    assert {rule.category for rule in autotriage.XID_RULES.values()} <= slugs


def test_xid_lines_are_read_by_number_in_their_usual_spellings():
    assert [code for code, *_ in autotriage.xids_in("NVRM: Xid (PCI:0000:18:00): 79, pid=9")] == [
        79
    ]
    assert [code for code, *_ in autotriage.xids_in("XID 94 on GPU 3; then Xid 45")] == [94, 45]
    assert [code for code, *_ in autotriage.xids_in("NVRM: Xid (43, pid: 5678): ...")] == [43]
    assert autotriage.xids_in("the xidian university") == []


@pytest.mark.parametrize(
    ("message", "category"),
    [
        ("NVRM: Xid (PCI:0000:3b:00): 171, Uncorrectable DRAM error", "gpu-hbm3-memory"),
        ("NVRM: Xid (PCI:0000:3b:00): 172, Uncorrectable SRAM error", "gpu-sram-memory"),
        ("NVRM: Xid (PCI:0000:3b:00): 158, GPU fatal timeout", "faulty-gpu"),
        ("NVRM: Xid (PCI:0000:3b:00): 146, NVLINK: TLW Error", "faulty-gpu"),
        ("NVRM: Xid (PCI:0000:3b:00): 54, Auxiliary power is not connected", "power-supply"),
        ("NVRM: Xid (PCI:0000:3b:00): 66, Illegal access by driver", "dependency"),
    ],
)  # fmt: skip
def test_codes_beyond_the_common_ones_read_as_the_xid_catalog_says(message, category):
    suggestion = suggest(facts(message))
    assert suggestion is not None
    assert suggestion.category == category, suggestion.scores


def test_an_informational_xid_weighs_less_than_an_unknown_code_from_dcgm():
    # 154 only reports that another XID changed the GPU's recovery action: a DCGM event of it
    # must count for less than one of a code the catalogue lacks (a generic GPU fault, 0.5)
    informational = EvidenceFact("dcgm", AT, "XID 154", host="h1", event_kind="xid", xid=154)
    unknown = EvidenceFact("dcgm", AT, "XID 250", host="h1", event_kind="xid", xid=250)
    low = suggest(facts(NCCL, hosts=("h1",)), [informational])
    generic = suggest(facts(NCCL, hosts=("h1",)), [unknown])
    assert low is not None and generic is not None
    assert generic.category == "faulty-gpu"
    assert low.scores.get("faulty-gpu", 0) < generic.scores["faulty-gpu"]


def test_nothing_recognisable_makes_no_suggestion():
    assert suggest(facts("the job exited with status 1")) is None


def test_the_demo_message_reads_as_a_faulty_gpu_on_its_host_with_a_note():
    # given the example: a watchdog line and an XID 79 in one message
    message = f"{NCCL} ; NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus"
    # when
    suggestion = suggest(facts(message, hosts=("gpu-node-17",)))
    # then
    assert suggestion is not None
    assert suggestion.category == "faulty-gpu"
    assert suggestion.hosts == ["gpu-node-17"]
    assert suggestion.component == "GPU has fallen off the bus (XID 79)"
    assert suggestion.confidence >= 0.9
    kinds = [(item.kind, item.category) for item in suggestion.evidence]
    assert kinds[0] == ("message", "faulty-gpu")
    assert ("message", "nccl-watchdog-timeout") in kinds


def test_evidence_beats_words_an_xid_on_one_host_40_s_earlier_names_the_gpu():
    # given a bare watchdog timeout on two hosts, and DCGM's XID 79 on one of them 40 s before
    xid = EvidenceFact(
        kind="dcgm", at=AT - timedelta(seconds=40), text="XID 79: GPU has fallen off the bus",
        url="/fleet/hosts/h2", host="h2", device="GPU-1", event_kind="xid", xid=79,
    )  # fmt: skip
    # when
    suggestion = suggest(facts(NCCL, hosts=("h1", "h2")), [xid])
    # then the hardware cause wins, on that host and device, and the note says why
    assert suggestion is not None
    assert suggestion.category == "faulty-gpu"
    assert suggestion.hosts == ["h2"]
    assert suggestion.devices == ["GPU-1"]
    assert suggestion.message_category == "nccl-watchdog-timeout"
    assert "alone reads as NCCL Watchdog Timeouts" in suggestion.note
    assert "on h2" in suggestion.note
    assert suggestion.evidence[0].kind == "dcgm"
    assert suggestion.evidence[0].as_json()["at"] == (AT - timedelta(seconds=40)).isoformat()


def test_the_note_names_the_host_once():
    xid = EvidenceFact("dcgm", AT, "XID 79 on GPU 3 of h2", host="h2", event_kind="xid", xid=79)
    suggestion = suggest(facts(NCCL, hosts=("h1", "h2")), [xid])
    assert suggestion is not None
    assert suggestion.note.count("h2") == 1


def test_evidence_on_another_host_of_the_attempt_counts_less():
    own = EvidenceFact("dcgm", AT, "XID 79", host="h1", event_kind="xid", xid=79)
    elsewhere = EvidenceFact(
        "dcgm", AT, "XID 79", host="h9", event_kind="xid", xid=79, own_host=False
    )
    near = suggest(facts(NCCL, hosts=("h1",)), [own])
    far = suggest(facts(NCCL, hosts=("h1",)), [elsewhere])
    assert near is not None and far is not None
    assert near.scores["faulty-gpu"] > far.scores["faulty-gpu"]
    assert far.hosts == ["h9"]


def test_a_straggler_alone_does_not_explain_a_timeout_but_names_the_culprit_host():
    slow = EvidenceFact("straggler", AT, "rank 7 slow (relative 0.41)", host="h7", device="GPU-7")
    suggestion = suggest(facts(NCCL, hosts=("h1", "h7")), [slow])
    assert suggestion is not None
    assert suggestion.category == "nccl-watchdog-timeout"
    assert suggestion.hosts == ["h7"]
    assert suggestion.note == ""


def test_a_hangs_first_silent_ranks_name_the_hosts():
    silent = EvidenceFact("first_silent", AT, "ranks 40, 41 stopped first", host="h5")
    suggestion = suggest(facts("Hang suspected: step stuck at 1200 for 12 min"), [silent])
    assert suggestion is not None
    assert suggestion.category == "nccl-watchdog-timeout"
    assert suggestion.hosts == ["h5"]


def test_a_confirmed_sdc_record_outweighs_a_loss_spike_message():
    record = EvidenceFact("sdc", AT, "SDC confirmed at step 9000", host="h3", verdict="confirmed")
    suggestion = suggest(facts("loss spike at step 9001"), [record])
    assert suggestion is not None
    assert suggestion.category == "silent-data-corruption"
    assert suggestion.hosts == ["h3"]


def test_software_causes_blame_no_hardware():
    suggestion = suggest(facts("CUDA error: an illegal memory access was encountered", ("h1",)))
    assert suggestion is not None
    assert suggestion.hosts == []


def test_two_causes_that_fit_lower_the_confidence():
    alone = suggest(facts("blk_update_request: I/O error, dev nvme0n1"))
    mixed = suggest(facts("blk_update_request: I/O error, dev nvme0n1; loss is nan"))
    assert alone is not None and mixed is not None
    assert mixed.confidence < alone.confidence


def test_admin_patterns_extend_the_rules_and_a_broken_one_is_skipped():
    mine = MessageRule("ours", r"frobnicator overheated", "power-supply", "Rack PSU", 0.9)
    broken = MessageRule("typo", r"(unclosed", "cpu", "CPU", 0.9)
    suggestion = suggest(facts("frobnicator overheated in rack 4"), extra_rules=[mine, broken])
    assert suggestion is not None
    assert suggestion.category == "power-supply"
    assert suggestion.component == "Rack PSU"
    assert autotriage.pattern_problem("(unclosed").startswith("Not a regular expression")


def test_a_huge_message_is_read_only_up_to_its_limit():
    tail = "NVRM: Xid (PCI:0000:18:00): 79, GGPU has fallen off the bus"
    message = "x" * autotriage.MESSAGE_MAX_CHARS + tail
    assert suggest(facts(message)) is None
