"""The base of the client's own errors that carry a stable code."""

from __future__ import annotations


class CodedError(Exception):
    """An error with a stable snake_case `code`, shown as "code: message"."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code

    def __str__(self) -> str:
        return f"{self.code}: {super().__str__()}"
