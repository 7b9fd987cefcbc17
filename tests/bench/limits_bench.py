"""limits: the ceilings other scenarios are shown against, alone (see limits.py)."""
import limits

ID = "limits"
TITLE = "this machine's ceilings: bash spawn, libuv pipe, crc32, loopback request"


def run(work):
    return limits.figures()
