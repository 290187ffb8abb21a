"""What runs one work item: the agent in-process (:mod:`.local`), an agent behind a rollout server driven
by the local TrainGate (:mod:`.traingate`), or nothing at all for answers that already exist
(:mod:`.stored`)."""
