"""`tunelab hadr-calc`: the HADR calculator given the engines' replication modes and the
calibration's write model."""

from __future__ import annotations

from tunelab import engines


def hadr_calc_main(argv: list[str]) -> int:
    """`tunelab hadr-calc`: tunelab.hadr.cli, with the engines' replication modes (it sits
    below the engines and takes them from here)."""
    from tunelab.hadr import cli as hadr_cli

    def modes(name: str):
        return engines.engine_class(name).replication

    def disk(path: str) -> tuple[float, float]:
        """The calibration's write model in the calculator's units: MB of 2^20 bytes (the
        calibration's are 1,024,000) and seconds."""
        from tunelab import calibrate

        cal = calibrate.load(path)
        if cal.write_rate_mb_s is None:
            raise ValueError(
                f"{path}: write_rate_mb_s: none (write time did not grow with size); give --disk"
            )
        return cal.write_rate_mb_s * cal.mb_bytes / 2**20, cal.write_overhead_ms / 1000

    return hadr_cli.main(argv, engines.names(), modes, disk)
