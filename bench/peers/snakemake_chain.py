"""A chain of N Snakemake rules, each depending on the previous one's
output file. A step is a `shell:` command (Snakemake runs each in a shell;
`run:` blocks cost a new Python process per job): `touch` for `noop`, the
native fibo program ($FIBO_BIN, built by bench/run.sh from
bench/fibo/fibo.c) for `fibo:K`. Snakemake keeps its record of each job as
files under .snakemake/ (not synced). Arguments: N DB [WORK] as for
langgraph_chain.py; DB's directory is the working directory (DB itself is
unused). "seconds" is from the first rule's output to the last one's
(file times), scaled by N/(N-1): Snakemake's start and DAG building are
excluded. Prints one JSON line like langgraph_chain.py; when Snakemake
fails (stock Snakemake 9 raises RecursionError on a chain of 1,000 rules)
the line has "error" and the exit status is 1."""
import json
import os
import shlex
import subprocess
import sys

N, DB = int(sys.argv[1]), os.path.abspath(sys.argv[2])
WORK = sys.argv[3] if len(sys.argv) > 3 else "noop"


def command() -> str:
    if WORK == "noop":
        return "touch {output}"
    if WORK.startswith("fibo:"):
        fibo = os.environ.get("FIBO_BIN")
        if not fibo:
            raise SystemExit("snakemake_chain.py: fibo work needs FIBO_BIN (the native fibo program)")
        return f"{shlex.quote(fibo)} {int(WORK[5:])} > {{output}}"
    raise SystemExit(f"unknown work {WORK!r}: noop or fibo:N")


def snakefile(n: int) -> str:
    lines = ["rule all:", f"    input: 's{n - 1}'", ""]
    for i in range(n):
        lines += [f"rule r{i}:"]
        if i:
            lines += [f"    input: 's{i - 1}'"]
        lines += [f"    output: 's{i}'", f"    shell: {command()!r}", ""]
    return "\n".join(lines)


def main() -> None:
    work_dir = os.path.dirname(DB)
    with open(os.path.join(work_dir, "Snakefile"), "w") as f:
        f.write(snakefile(N))
    snakemake = os.path.join(os.path.dirname(sys.executable), "snakemake")
    out = subprocess.run([snakemake, "--cores", "1", "--snakefile", "Snakefile"],
                         cwd=work_dir, capture_output=True, text=True)
    if out.returncode != 0:
        lines = [line.strip() for line in out.stderr.splitlines() if line.strip()]
        error = next((line for line in lines if "RecursionError" in line), lines[-1] if lines else "?")
        print(json.dumps({"peer": "snakemake", "steps": N, "error": error}))
        sys.exit(1)
    first = os.stat(os.path.join(work_dir, "s0")).st_mtime
    last = os.stat(os.path.join(work_dir, f"s{N - 1}")).st_mtime
    seconds = (last - first) * N / (N - 1) if N > 1 else 0.0
    print(json.dumps({"peer": "snakemake", "steps": N, "seconds": seconds,
                      "journal_mode": "none (job records are files under .snakemake/)",
                      "synchronous": "no sync"}))


if __name__ == "__main__":
    main()
