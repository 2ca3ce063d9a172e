"""tdev.route"""
