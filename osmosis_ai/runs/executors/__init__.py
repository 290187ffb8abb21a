"""What runs one work item: the agent in-process (:mod:`.local`), or behind a rollout server driven by
the local TrainGate (:mod:`.traingate`)."""
