"""A target's recorded states (`eagle-nb record`): the writer (recording_writer.py), the reader
(recording.py), the record and its error (records.py), trainers' teacher-forced files
(foreign_features.py), and the step-by-step replay reference (replay.py)."""
