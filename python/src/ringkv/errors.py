"""The exceptions of the ringkv package."""


class RingkvError(Exception):
    """Base of every error this package raises about its input or its tools."""


class GoldenError(RingkvError):
    """A golden set, case or manifest is unusable (corrupt, wrong version, inconsistent). The message
    names the file and the field. Never a verdict on the engine."""


class EngineError(RingkvError):
    """An engine broke the replay protocol (ringkv.replay): a missing method, an output of the wrong
    shape or name. The message names the engine, the step and the sequence."""


class CheckError(RingkvError):
    """`ringkv check` could not be run or could not judge (no CLI found, unusable input: exit code 2)."""


class Refused(Exception):
    """Raised by an engine's rollback() to refuse a step's rollbacks (spec 1.1 §5.1.2): the engine
    changes nothing, and the step is written to the outputs file's refused_steps."""
