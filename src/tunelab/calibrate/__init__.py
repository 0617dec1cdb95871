"""Storage calibration with fio: OVERHEAD, DEVICE READ RATE / TRANSFERRATE, the write model.

For other parts of the lab:
- ``load(path)`` reads a calibration file into a ``Calibration``;
- ``default_path(data_dir)`` names the file for this host and data directory;
- ``calibrated_value(cal, knob, page_size)`` gives a DB2 knob's measured value
  (``overhead``/``overhead_ms`` in ms, ``transferrate``/``transferrate_ms`` in ms per page);
- ``device_fraction(mb_per_s, cal)`` puts an achieved read rate against the device's.
MB throughout is DB2's: 1,024,000 bytes (``MB_BYTES``).
"""

from tunelab.calibrate.calibration import (
    Calibration,
    CalibrationError,
    calibrated_value,
    default_path,
    device_fraction,
    load,
    save,
)
from tunelab.calibrate.model import MB_BYTES

__all__ = [
    "MB_BYTES",
    "Calibration",
    "CalibrationError",
    "calibrated_value",
    "default_path",
    "device_fraction",
    "load",
    "save",
]
