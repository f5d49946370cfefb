"""Elastic inference capacity (issue #19, seed 004 §3.3): a guaranteed floor of cards, a burst
ceiling, and a loop that moves a team's cards between them with its load.

Pure modules (no Django, no clock, times in Unix seconds): :mod:`.policy` (one scaling
decision), :mod:`.forecast` (time-of-week profile and pre-scaling), :mod:`.whatif` (a policy
replayed over a metric history).
"""
