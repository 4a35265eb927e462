"""platbench explain: why a platform costs what it costs, a ladder of platforms from bm to it, one mechanism a rung
(ladder.py), the runner host's rungs (hosts.py), the attribution with its intervals (attribution.py) and the command
(command.py). The report draws a ladder campaign's waterfall (platbench/report/ladder.py)."""
