"""The pure rules of delivery: the vocabulary, the transition and claim tables, and ``decide``.

No database, no clock, no settings: the worker, the console, the writes and the replay all ask
the same functions. ``machine`` is compiled with mypyc (``config.native``).
"""
