"""What a run does with its plan: print it (text, json, sarif, github),
diff or write it, review it fix by fix, fix it by a trace, guard CI."""
