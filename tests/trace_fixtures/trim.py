"""How the fixtures here were made: run a script of ../trace_scripts under torch
2.13 with ``TORCH_TRACE=DIR``, then ``python trim.py DIR OUT.log`` keeps the
records codemods/trace.py reads (with only the fields it reads) and one
payload-carrying record, so the parser's skipping of payload lines is tested."""

import json
import sys

KEEP = ("str", "dynamo_start", "dynamo_output_graph", "compilation_metrics")
METRICS = (
    "co_name",
    "co_filename",
    "co_firstlineno",
    "recompile_reason",
    "fail_type",
    "fail_reason",
    "cache_size",
    "graph_op_count",
)


def trim(src: str, out: str) -> None:
    import glob

    lines_out = []
    kept_payload = False
    for path in sorted(glob.glob(f"{src}/*")):
        with open(path, encoding="utf-8") as fh:
            lines = fh.readlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            i += 1
            if line.startswith("\t"):
                continue
            start = line.find("] {") + 2
            prefix, record = line[:start], json.loads(line[start:])
            payload = []
            while i < len(lines) and lines[i].startswith("\t"):
                payload.append(lines[i])
                i += 1
            key = next((k for k in KEEP if k in record), None)
            if key is None:
                if payload and not kept_payload:  # one payload record, as it appears
                    kept_payload = True
                    lines_out.append(line)
                    lines_out.extend(payload)
                continue
            if key == "compilation_metrics":
                record[key] = {k: record[key].get(k) for k in METRICS}
            if key == "dynamo_output_graph":
                record.pop("has_payload", None)
            lines_out.append(prefix + json.dumps(record) + "\n")
    with open(out, "w", encoding="utf-8") as fh:
        fh.writelines(lines_out)


if __name__ == "__main__":
    trim(sys.argv[1], sys.argv[2])
