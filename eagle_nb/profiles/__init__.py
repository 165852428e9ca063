"""Speculation profiles (`eagle-nb profile`, docs/profile.md): the histogram -> rates conversion
(profile.py), strict JSON reading (profile_json.py), profiles from engine payloads
(profile_engines.py), what a profile gives an engine's knob (knobs.py), the tune model (tune.py)
and step costs measured on the local pair (batch_costs.py)."""
