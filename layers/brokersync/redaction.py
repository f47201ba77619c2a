"""No secret in any log line, at any level: log records are redacted as they are created.

Two libraries log credentials when their loggers are at DEBUG: stomp.py 9 writes each frame it
sends, the CONNECT frame's ``passcode:`` header included, and botocore writes each response
body, GetSecretValue's ``SecretString`` included. Lambda's log level setting (or
``POWERTOOLS_LOG_LEVEL``) can turn either on. Filters on loggers or handlers miss records of
child loggers and handlers added later, so :func:`install` wraps the log record factory
instead: every record any logger creates is formatted once and rewritten when it holds

* a STOMP ``passcode`` header, or a JSON ``SecretString``/``SecretBinary``/``password`` value;
* a value registered with :func:`register_secret` (each broker password, when it is read).

The cost falls only on records a logger actually emits (the factory runs after the level check).
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

MASK = "***"
_PATTERNS = (
    # STOMP frames as stomp.py logs them: header lines, or a repr of the header dict.
    re.compile(r"(passcode:)[^\s'\",\\]*"),
    re.compile(r"(['\"]passcode['\"]\s*:\s*['\"])[^'\"]*"),
    # botocore's DEBUG response bodies: a whole secret value, up to its first unescaped quote...
    re.compile(r'(\\*"(?:SecretString|SecretBinary)\\*"\s*:\s*\\*")(?:.*?)(?=(?<!\\)")'),
    # ...and any password field, also inside a JSON document held in a string (escaped quotes).
    re.compile(r'(\\*"(?:password|Password|passcode)\\*"\s*:\s*\\*")[^"\\]*'),
)
#: Registered secrets, longest first (so a secret containing another is masked whole).
_secrets: tuple[str, ...] = ()
_lock = threading.Lock()
_installed = False


#: Amazon MQ's shortest broker password; shorter values (the local world's) are not registered, since
#: masking them would mangle ordinary words in every line.
MIN_SECRET_LENGTH = 12


def register_secret(value: str) -> None:
    """Mask ``value`` wherever it appears in a log record from now on."""
    global _secrets  # noqa: PLW0603 (replaced whole, so redact() reads it without the lock)
    if len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _secrets = tuple(sorted({*_secrets, value}, key=len, reverse=True))


def redact(text: str) -> str:
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + MASK, text)
    for secret in _secrets:
        text = text.replace(secret, MASK)
    return text


def install() -> None:
    """Redact every log record created in this process from now on; calling it again changes nothing."""
    global _installed  # noqa: PLW0603 (one factory per process)
    with _lock:
        if _installed:
            return
        create = logging.getLogRecordFactory()

        def redacting_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = create(*args, **kwargs)
            try:
                message = record.getMessage()
            except Exception:
                return record
            cleaned = redact(message)
            if cleaned != message:
                record.msg, record.args = cleaned, None
            return record

        logging.setLogRecordFactory(redacting_factory)
        _installed = True
