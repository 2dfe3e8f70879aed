// CProtFSLaunch's constructor has run before this: it takes `protfs app launch` of a prewarmed app
// (and exits with the app's status) before the Swift part starts.
import CProtFSLaunch
import Foundation
import ProtFSCLI

// Everything, from hiding the passcodes to the exit status, is in the ProtFSCLI library, where
// tests can run it in-process.
exit(ProtFSCommandLine.main())
