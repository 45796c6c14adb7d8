"""For tests that press Ctrl-C on a subprocess: a child started from a shell's background job inherits
SIGINT *ignored*, and Python then never turns SIGINT into KeyboardInterrupt (shell convention: Ctrl-C at
the terminal does not reach background jobs). ``preexec_fn=interruptible`` gives the child the default
SIGINT disposition, so the test measures the program, not how the test runner was started."""

import signal


def interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
