"""telemetry 0027 turns a health state's JSON readings and fields sent into arrays by field
position, and back when reversed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

BEFORE = [("telemetry", "0026_metric_hour_sums")]
AFTER = [("telemetry", "0027_health_state_arrays")]
T = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
TEMP, POWER, XID = "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_XID_ERRORS"
# Positions in telemetry.dcgm.FIELDS.
TEMP_AT, POWER_AT, XID_AT, THROTTLE_AT = 0, 2, 8, 27


@pytest.mark.django_db(transaction=True)
def test_json_states_become_arrays_by_position_and_back(migrate_to):
    # given (before) a state with readings and fields sent, and one just made (empty)
    apps = migrate_to(BEFORE)
    Device = apps.get_model("telemetry", "Device")
    DeviceHealthState = apps.get_model("telemetry", "DeviceHealthState")
    seen, new = Device.objects.create(uuid="GPU-seen"), Device.objects.create(uuid="GPU-new")
    values = {TEMP: 61.5, POWER: 612.4570000000001, XID: 0.0}
    sent = sorted([TEMP, POWER, XID, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"])
    DeviceHealthState.objects.create(
        device=seen, last_values=values, fields_sent=sent, last_xid=79, last_push_at=T
    )
    DeviceHealthState.objects.create(device=new, last_push_at=T)

    # when migrated
    apps = migrate_to(AFTER)
    State = apps.get_model("telemetry", "DeviceHealthState")

    # then the readings sit at their fields' positions, NULL elsewhere; the rest is kept
    state = State.objects.get(device__uuid="GPU-seen")
    assert len(state.last_readings) == 28
    assert [state.last_readings[i] for i in (TEMP_AT, POWER_AT, XID_AT)] == [
        61.5,
        612.4570000000001,
        0.0,
    ]
    assert sum(value is not None for value in state.last_readings) == 3
    assert state.sent_positions == [TEMP_AT, POWER_AT, XID_AT, THROTTLE_AT]
    assert (state.last_xid, state.last_push_at) == (79, T)
    empty = State.objects.get(device__uuid="GPU-new")
    assert (empty.last_readings, empty.sent_positions) == ([], [])

    # and reversed, the JSON is back as it was
    apps = migrate_to(BEFORE)
    State = apps.get_model("telemetry", "DeviceHealthState")
    state = State.objects.get(device__uuid="GPU-seen")
    assert (state.last_values, state.fields_sent) == (values, sent)
    empty = State.objects.get(device__uuid="GPU-new")
    assert (empty.last_values, empty.fields_sent) == ({}, [])
