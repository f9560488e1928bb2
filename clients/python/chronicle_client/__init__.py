"""Chronicle's Python client: log metrics and events from a training job, never lose them.

from chronicle_client import Run

with Run("llama-70b", url="http://chronicle:8000", token="...") as run:
    for step in range(steps):
        run.log({"loss": loss}, step=step)
"""

__version__ = "0.1.0"

from chronicle_client.client import Run
from chronicle_client.sender import Sender, Stats
from chronicle_client.spool import Spool, SpoolBusyError
from chronicle_client.transport import ChronicleError, GaveUpError

__all__ = [
    "ChronicleError",
    "GaveUpError",
    "Run",
    "Sender",
    "Spool",
    "SpoolBusyError",
    "Stats",
    "__version__",
]
