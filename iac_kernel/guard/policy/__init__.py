"""What a guarded program's exact argv gets at exec time: the ordered steps of
:mod:`.verdict` and the rules, git checks and environment checks they run on."""
