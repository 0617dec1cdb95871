"""What the MariaDB engine declares without a server: its image, its knobs (with what each
one sets and how it is read back, and InnoDB's buffer pool floor per page size) and the rules
across them, the knobs it has no counterpart for, and what its cold runs, engine time and read
counter mean.
``tunelab engines`` and the sweep schema read it; the engine that runs it is
``tunelab.engines.mariadb``."""

from __future__ import annotations

from typing import Any

from tunelab.engines import mariadb_replica as replica
from tunelab.engines import readahead
from tunelab.engines.base import (
    EngineInfo,
    ImageSource,
    ImageVersion,
    Knob,
    ReadCounter,
    version_knob,
)
from tunelab.engines.mariadb_sql import INDEX_KINDS
from tunelab.engines.server import ServerKnobRules

MIB = 1 << 20
# InnoDB keeps innodb_buffer_pool_size in whole MiB (it truncates the rest) and refuses to
# start below a floor that grows with the page size (measured on MariaDB 10.11.19:
# "innodb_page_size=65536 requires innodb_buffer_pool_size >= 21 MiB").
MIN_POOL_MIB = {4096: 2, 8192: 3, 16384: 6, 32768: 11, 65536: 21}
PAGE_SIZES = tuple(MIN_POOL_MIB)

# MariaDB 10.11 by default; 11.8 (knob engine_version) from the next Debian release's package.
# The official image follows the same contract as the local one (MARIADB_ROOT_PASSWORD,
# server options as arguments, datadir /var/lib/mysql): see containers/mariadb/README.md.
IMAGE = ImageSource(
    "mariadb:10.11.8",
    "tunelab/mariadb:local",
    "mariadb/build.sh",
    versions=(
        ImageVersion("10.11", "bookworm", "mariadb:10.11"),
        ImageVersion("11.8", "trixie", "mariadb:11.8"),
    ),
)

INFO = EngineInfo(
    name="mariadb",
    summary="MariaDB / InnoDB 10.11 (or 11.8: engine_version) in a container (Docker); the "
    "open stand-in for DB2's knobs",
    knobs={
        "page_size": Knob(
            "page_size",
            "integer",
            "innodb_page_size, on a fresh data directory",
            values=PAGE_SIZES,
            unit="bytes",
            fresh=True,
            default=16384,
            readback="SHOW GLOBAL VARIABLES innodb_page_size",
        ),
        "buffer_pool": Knob(
            "buffer_pool",
            "integer",
            "innodb_buffer_pool_size = pages x page_size, resized in place; InnoDB keeps whole "
            "MiB and needs at least 2/3/6/11/21 MiB at 4/8/16/32/64 KiB pages",
            minimum=min(mib * MIB // p for p, mib in MIN_POOL_MIB.items()),
            unit="pages",
            readback="innodb_buffer_pool_size / innodb_page_size",
        ),
        "read_ahead_threshold": Knob(
            "read_ahead_threshold",
            "integer",
            "innodb_read_ahead_threshold: sequential pages of an extent that trigger linear "
            "read-ahead of the next extent (0 turns it off)",
            minimum=0,
            maximum=64,
            default=56,
            readback="innodb_read_ahead_threshold",
        ),
        "random_read_ahead": Knob(
            "random_read_ahead",
            "boolean",
            "innodb_random_read_ahead",
            default=False,
            readback="innodb_random_read_ahead",
        ),
        "lock_granularity": Knob(
            "lock_granularity",
            "string",
            "row: InnoDB row locks; table: LOCK TABLES ... WRITE around every transaction",
            values=("row", "table"),
            default="row",
            readback="SHOW OPEN TABLES (In_use) while a probe transaction holds the lock; "
            "information_schema.TABLES ENGINE for InnoDB's row locks",
        ),
        "index": Knob(
            "index",
            "string",
            "none; nonclustered: secondary index; clustered: PRIMARY KEY (attribute, id), "
            "rebuilt after the load; covering: composite (attribute, selected columns); "
            "covering_wrong_order: (selected columns, attribute)",
            values=INDEX_KINDS,
            default="none",
            readback="information_schema.STATISTICS",
        ),
        "direct_io": Knob(
            "direct_io",
            "boolean",
            "innodb_flush_method=O_DIRECT (true) or fsync (false, reads use the OS cache)",
            restart=True,
            default=True,
            readback="innodb_flush_method",
        ),
        readahead.NAME: readahead.knob(
            "the data directory (InnoDB's reads meet it only with direct_io: false: O_DIRECT "
            "bypasses the page cache and its read-ahead)"
        ),
        "sync_mode": Knob(
            "sync_mode",
            "string",
            "none: no replica (and no binary log); otherwise a replica (a second container, "
            "mariadb_replica.py) of the primary's binary log (ROW, sync_binlog=1): async (no "
            "semi-sync), or semi-sync with rpl_semi_sync_master_wait_point = AFTER_COMMIT or "
            "AFTER_SYNC (the commit waits for the replica's receipt of its events, after the "
            "binary log's sync, after or before the storage engine's commit)",
            values=replica.MODES,
            default=replica.NONE,
            readback="log_bin, rpl_semi_sync_master_enabled, rpl_semi_sync_master_wait_point; "
            "Rpl_semi_sync_master_status ON with one client; the replica's Slave_IO_Running "
            "and Slave_SQL_Running",
        ),
        "network_rtt_ms": Knob(
            "network_rtt_ms",
            "number",
            "round trip between primary and replica: a delay proxy (host.delayproxy) on the "
            "run network's gateway holds each byte half of it each way; 0: the proxy's hops "
            "only",
            minimum=0,
            maximum=1000,
            unit="ms",
            default=0,
            readback="the proxy's delay; the link's round trip measured through it and the "
            "semi-sync status variables are recorded per repetition",
        ),
        "engine_version": version_knob(
            IMAGE,
            "the server's version, each a server of its own: 10.11 (the default, Debian 12's "
            "mariadb-server) or 11.8 (Debian 13's), the image of the Debian release that "
            "packages it; the lab's settings and counters are the same in both",
        ),
    },
    notes={
        "prefetch_size": "InnoDB reads ahead whole extents (64 pages of 16 KiB, 1 MiB); "
        "steer it with read_ahead_threshold and random_read_ahead",
        "extent_size": "InnoDB's extent is fixed by the page size",
        "overhead_ms": "MariaDB 10.11's optimizer has no I/O cost knobs",
        "transferrate_ms": "MariaDB 10.11's optimizer has no I/O cost knobs",
    },
    needs_container=True,
    image=IMAGE,
    cold_steps={"restart": "the server was restarted, with no buffer-pool dump or load"},
    cold_reads="InnoDB reads each page it misses with one read of the page size. With "
    "direct_io: true (O_DIRECT, the default) that read goes to the device as it is and the "
    "kernel's read-ahead plays no part: what reads ahead is InnoDB's own linear read-ahead, "
    "the next extent whole once read_ahead_threshold pages of one were read in order. With "
    "direct_io: false the read goes through the OS page cache and the kernel reads ahead of "
    "it as of any file",
    engine_time="performance_schema: SUM_TIMER_WAIT of the statements the measured "
    "connections ran (events_statements_summary_by_thread_by_event_name, read on a separate "
    "connection once they are idle), each from the server reading it to the server finishing "
    "it, just after its reply left; the C client reads every result whole (mysql_store_result), "
    "so the server never waits for the lab",
    reads=ReadCounter(
        "Innodb_pages_read: pages InnoDB read from its files into the buffer pool, read-ahead "
        "included; with innodb_flush_method=O_DIRECT (direct_io: true, the default) each read "
        "bypasses the OS page cache, with fsync the OS may serve it from its page cache",
        direct_knob="direct_io",
    ),
)


class MariaDBKnobRules(ServerKnobRules):
    def check_point(self, knobs: dict[str, Any]) -> list[tuple[str, str, str]]:
        if rules := replica.rtt_needs_standby(knobs):
            return rules
        page = knobs.get("page_size", INFO.knobs["page_size"].default)
        pages = knobs.get("buffer_pool")
        if pages is None or page not in MIN_POOL_MIB:
            return []
        nbytes = int(pages) * int(page)
        per_mib = MIB // int(page)
        allowed = (
            f"a multiple of {per_mib} pages (whole MiB) and at least "
            f"{MIN_POOL_MIB[page] * per_mib} pages ({MIN_POOL_MIB[page]} MiB) at page_size {page}"
        )
        if nbytes < MIN_POOL_MIB[page] * MIB:
            return [("buffer_pool", f"{pages} pages is below InnoDB's minimum", allowed)]
        if nbytes % MIB:
            return [
                (
                    "buffer_pool",
                    f"{pages} pages is not whole MiB: InnoDB would truncate it",
                    allowed,
                )
            ]
        return []

    def warn_point(self, knobs: dict[str, Any]) -> list[tuple[str, str]]:
        if readahead.wanted(knobs) and knobs.get("direct_io", True):
            return [
                (
                    readahead.NAME,
                    "InnoDB reads its files with O_DIRECT (direct_io: true), "
                    "which bypasses the kernel's read-ahead: os_read_ahead changes nothing "
                    "there (set direct_io: false)",
                )
            ]
        return []
