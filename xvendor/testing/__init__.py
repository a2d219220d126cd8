"""Testing aids shared by the test suite, ``xvendor check`` and users' own kernel tests."""
