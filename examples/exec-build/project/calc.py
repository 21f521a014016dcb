"""A tiny library for the exec-build example."""


def add(a, b):
    return a + b


def mean(values):
    if not values:
        raise ValueError("mean of nothing")
    return sum(values) / len(values)
