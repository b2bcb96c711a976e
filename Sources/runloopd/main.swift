import RunLoopServer

RunLoopdCommand.mainInChosenLogFormat()
