"""Kinds declared by the tests alone, each a folder as the collection's kinds are (plugins/plugin_utils/placements/)."""
