"""What an ACP method does to a session: a turn, its questions, slash commands, options,
the notifications that follow, opening and listing, and who controls a shared session."""
