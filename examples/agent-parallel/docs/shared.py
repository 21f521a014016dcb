"""Code both lanes touch."""

VERSION = "1.0"
