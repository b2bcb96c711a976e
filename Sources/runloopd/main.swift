import RunLoopServer

RunLoopdCommand.main()
