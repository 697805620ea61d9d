"""The torture suite: kills, races, freezes, fuzzing and a full disk under the stores."""
