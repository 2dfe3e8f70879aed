import Foundation
import ProtFSCLI

// Everything, from hiding the passcodes to the exit status, is in the ProtFSCLI library, where
// tests can run it in-process.
exit(ProtFSCommandLine.main())
