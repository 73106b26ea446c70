"""Developer and test tooling that is not part of the shipped operator.

``hack.fakebootc`` is the simulated bootc host; other subpackages (e.g. ``hack.testenv``)
belong to the test harness. Nothing under ``bootc_operator`` imports from here.
"""
