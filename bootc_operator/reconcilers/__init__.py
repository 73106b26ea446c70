"""The controller's reconcilers (membership, rollout, status) and their pure decisions.

Pure modules (exhaustively unit-tested): ``selectors``, ``nodestate``, ``slots``,
``poolstatus``. The async reconcilers built on them read only informer caches
and write through narrow patches.
"""
