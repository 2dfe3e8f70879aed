import ProtFS
