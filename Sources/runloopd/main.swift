// Placeholder entry point while the server is being built.
print("runloopd")
