"""A tiny calculator the agents work on."""


def add(a, b):
    return a + b
