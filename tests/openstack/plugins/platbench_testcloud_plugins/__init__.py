"""Plugins for platbench's loopback test cloud; imported only inside the test cloud's venv."""
