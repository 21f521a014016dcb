"""The work of one step, shared by the peer scripts: `noop` (the echo
chain) or `fibo:N` (fibo(N), computed recursively like the C program and
the WASM worker in bench/fibo/)."""


def fibo(n: int) -> int:
    return n if n < 2 else fibo(n - 1) + fibo(n - 2)


def parse(spec: str):
    """A function of the step index: the work one step does (None for
    `noop`, the value fibo(N) for `fibo:N`)."""
    if spec == "noop":
        return lambda i: None
    if spec.startswith("fibo:"):
        n = int(spec[len("fibo:"):])
        return lambda i: fibo(n)
    raise SystemExit(f"unknown work {spec!r}: noop or fibo:N")
