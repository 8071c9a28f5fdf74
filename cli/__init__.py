"""The `kb` command line: a surface like the bots and the site (it parses options, calls the core, prints)."""
