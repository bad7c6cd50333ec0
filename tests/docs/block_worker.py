"""One page's python blocks, run in order in one namespace in this process (test_doc_blocks.py
starts one per page, so a page's imports, JAX flags or forked workers never meet another's).
Reads JSON requests {"id", "code"} from stdin, one a line; answers each on stdout with a line
PREFIX + JSON {"ok", "error"}; what the blocks print goes to stderr."""
import json
import sys
import traceback

PREFIX = "\x00doc-block-result "


def main():
    out = sys.stdout
    sys.stdout = sys.stderr
    ns = {"__name__": "__main__"}
    for line in sys.stdin:
        req = json.loads(line)
        try:
            exec(compile(req["code"], req["id"], "exec"), ns)
            res = {"ok": True, "error": ""}
        except BaseException:  # noqa: B902  (SystemExit from a block is a failure too)
            res = {"ok": False, "error": traceback.format_exc()}
        out.write(PREFIX + json.dumps(res) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
