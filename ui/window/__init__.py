"""The main window and its parts (menus, run, tour, links, exports, settings, sessions)."""
