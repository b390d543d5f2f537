"""PIP-393: the Java client's negative-ack tracker, both designs, as models that never print.

- pair_map:     the old design's open-addressing long-long-pair hash map (sections, fill/idle factors)
- old_tracker:  the tracker before 4.0.2: that map, a timer every third of the delay scanning it all
- new_tracker:  PIP-393's tracker: sorted time buckets -> ledger id -> 64-bit Roaring bitmap
- layout:       what each design's objects occupy on a Java heap (the documented layout model)
- plan:         steady-state memory of a workload, both designs, and the precision to choose
- simulate:     a generated workload driven through both trackers on a simulated clock
"""
