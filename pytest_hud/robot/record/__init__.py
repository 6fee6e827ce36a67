"""Recording episodes as a LeRobot dataset: the feature schema, the writer, the merge."""
