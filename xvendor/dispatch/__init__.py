"""The dispatch engine (``engine``) and the backend record (``records``); the public face is
``xvendor.registry``."""
