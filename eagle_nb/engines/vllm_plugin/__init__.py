"""Modules that run INSIDE a vLLM engine process, in the engine's own environment.

The engine imports them by module path with this folder on its PYTHONPATH (never through
`eagle_nb`, whose package `__init__` chain would pull in the kit's dependencies): they import
vLLM, torch and safetensors only, and nothing from eagle_nb. The kit never imports them either.
"""
