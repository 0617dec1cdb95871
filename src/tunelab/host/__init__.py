"""What the lab needs of the host it runs on, below everything that measures: atomic
writes, the bench lock, block devices, cold caches, the clock's step, containers, the
delay proxy, the device probe, stops (signals), the job commands, CPU placement and
interference, who owns a run's folders and containers, provenance, sizes and units, and the
one reader of every YAML file."""
